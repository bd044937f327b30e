"""Shared plumbing of the node operations: the one upstream batch, adding fields, mini-batches.

Micro-batches are the engine's business: a role hands its engine whole mini-batches, and the engine plans the
micro-batches under its own token budget.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rl_runtime.workers import NodeContext, StepData, StepDataError


def single_input(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """The batch of the node's one upstream node; a StepDataError when it has none or several."""
    if len(inputs) != 1:
        raise StepDataError(
            f"node {ctx.node.id!r} ({ctx.node.operation}) takes the batch of exactly one upstream node, got "
            f"{len(inputs)} ({', '.join(inputs) or 'none'}); give it one dependency in the pipeline"
        )
    return next(iter(inputs.values()))


def require_fields(data: StepData, names: tuple[str, ...], node: str) -> None:
    """Raise StepDataError naming the fields of `names` that `data` lacks and the node that needs them."""
    missing = [name for name in names if name not in data.batch]
    if missing:
        raise StepDataError(
            f"node {node!r} needs batch fields {missing}, which no upstream node produced; found {sorted(data.batch)}"
        )


def with_fields(data: StepData, metrics: Mapping[str, float] | None = None, **tensors: torch.Tensor) -> StepData:
    """`data` with `tensors` added (or replaced) and `metrics` as the node's metrics."""
    return StepData({**data.batch, **tensors}, data.extras, metrics or {})


def mini_batch_rows(num_samples: int, num_mini_batches: int) -> list[list[int]]:
    """Contiguous row ranges of `num_mini_batches` equal mini-batches of a rank's `num_samples` samples."""
    if num_samples % num_mini_batches:
        raise StepDataError(
            f"{num_samples} samples on this rank do not split into batch.mini_batches_per_step={num_mini_batches} "
            "equal mini-batches; the batch plan should have refused this, so a node changed the sample count"
        )
    size = num_samples // num_mini_batches
    return [list(range(start, start + size)) for start in range(0, num_samples, size)]
