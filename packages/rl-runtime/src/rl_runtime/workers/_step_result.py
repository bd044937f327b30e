"""`StepResult`: what a driver got back from one step (every rank's metrics, merged), under Ray or torchrun."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import attrs

from rl_runtime.metrics import reduce_rank_metrics


@attrs.frozen
class StepResult:
    """What the driver got back from one step."""

    step: int
    metrics: dict[str, float]
    """Merged over ranks with `rl_runtime.metrics.reduce_rank_metrics`."""
    per_rank: tuple[dict[str, float], ...]
    """Each rank's own metrics, by rank."""
    received_bytes: int
    """Pickled size of everything `ray.get` returned to the driver this step (the per-rank metric dicts)."""


def step_result(step: int, per_rank: Sequence[dict[str, float]]) -> StepResult:
    """The StepResult of `step` from each rank's metrics (by rank): merged with `reduce_rank_metrics`, and the
    pickled size of what the driver received."""
    ranks = tuple(per_rank)
    received = len(pickle.dumps(ranks, protocol=pickle.HIGHEST_PROTOCOL))
    return StepResult(step, reduce_rank_metrics(ranks), ranks, received)
