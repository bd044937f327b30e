"""Check an advantage estimator's keyword parameters by running it once on a small batch of the run's group size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl_core.advantages._registry import get_advantage_estimator
from rl_core.advantages._types import AdvantageInputs

_PROBE_GROUPS = 2
_PROBE_TOKENS = 2


def _probe_inputs(group_size: int) -> AdvantageInputs:
    """Two groups of `group_size` two-token samples with distinct rewards, and every optional input an estimator may
    read (critic values, greedy baseline rewards)."""
    rows = _PROBE_GROUPS * group_size
    rewards = torch.zeros(rows, _PROBE_TOKENS)
    rewards[:, -1] = torch.arange(rows, dtype=torch.float32)
    return AdvantageInputs(
        token_level_rewards=rewards,
        response_mask=torch.ones(rows, _PROBE_TOKENS, dtype=torch.bool),
        group_ids=torch.arange(_PROBE_GROUPS).repeat_interleave(group_size),
        values=torch.zeros(rows, _PROBE_TOKENS),
        baseline_rewards=torch.zeros(rows),
    )


def check_advantage_params(name: str, params: Mapping[str, Any], *, group_size: int = 2) -> None:
    """Raise ValueError with the estimator's own message when the advantage estimator `name` refuses `params`, or
    groups of `group_size` samples (`batch.samples_per_prompt`).

    The estimators check their parameters' values when called (an epsilon not above 0, a discount outside [0, 1],
    ...) and some the batch's groups (pass@k needs two samples per group); running the estimator once on two groups
    of `group_size` two-token samples lets a config loader refuse such a setting before training starts instead of
    at the first step. An unknown name raises `UnknownNameError`; `group_size` < 1 raises ValueError."""
    if group_size < 1:
        raise ValueError(f"group_size must be an int >= 1, got {group_size!r}")
    estimator = get_advantage_estimator(name)
    try:
        estimator(_probe_inputs(group_size), **params)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"advantage estimator {name!r} refuses {dict(params)!r} with groups of {group_size}: {error}"
        ) from error
