"""The advantage estimator registry: a plain dict filled by a decorator."""

from __future__ import annotations

from rl_core._registry import lookup, registrar
from rl_core.advantages._types import AdvantageEstimator

_KIND = "advantage estimator"

ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}
"""Advantage estimators by name."""

register_advantage_estimator = registrar(ADVANTAGE_ESTIMATORS, _KIND)


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """Return the estimator registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(ADVANTAGE_ESTIMATORS, name, _KIND)
