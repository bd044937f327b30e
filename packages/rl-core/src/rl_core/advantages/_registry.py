"""The advantage estimator registry: a plain dict filled by a decorator, and an estimator bound to its parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from rl_core._registry import lookup, registrar
from rl_core.advantages._types import AdvantageEstimator, AdvantageInputs, AdvantageOutput

_KIND = "advantage estimator"

ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}
"""Advantage estimators by name."""

register_advantage_estimator = registrar(ADVANTAGE_ESTIMATORS, _KIND)


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """Return the estimator registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(ADVANTAGE_ESTIMATORS, name, _KIND)


@dataclass(frozen=True, eq=False)
class BoundEstimator:
    """The estimator registered as `name` with its keyword `params`, looked up once (an unknown name is refused on
    construction), then called on each step's batch as the sample schema names it.

    Attributes:
        name: an `ADVANTAGE_ESTIMATORS` name.
        params: the estimator's keyword parameters (kept as a read-only copy).
        fn: the estimator function, filled in on construction.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    fn: AdvantageEstimator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Frozen: the looked-up function and the read-only copy are set once here.
        object.__setattr__(self, "fn", get_advantage_estimator(self.name))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __call__(self, batch: Mapping[str, torch.Tensor]) -> AdvantageOutput:
        """`(B, T)` advantages and returns of `batch` (`AdvantageInputs.from_batch`: `token_level_rewards`,
        `response_mask`, `group_id`, and `values` / `baseline_rewards` where present)."""
        return self.fn(AdvantageInputs.from_batch(batch), **self.params)
