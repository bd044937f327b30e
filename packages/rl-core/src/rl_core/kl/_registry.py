"""The KL estimator registry: a plain dict filled by a decorator."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_core._registry import lookup, registrar

_KIND = "KL estimator"

KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""`fn(log_probs (B, T), ref_log_probs (B, T)) -> (B, T)` per-token KL estimate."""

KL_ESTIMATORS: dict[str, KLEstimator] = {}
"""KL estimators by name (aliases share one function)."""

register_kl_estimator = registrar(KL_ESTIMATORS, _KIND)


def get_kl_estimator(name: str) -> KLEstimator:
    """Return the estimator registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(KL_ESTIMATORS, name, _KIND)
