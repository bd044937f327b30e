"""Shared plumbing of the node operations: the one upstream batch, adding fields, micro- and mini-batches."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.distributed as dist

from rl_coordinator.balancing import min_num_micro_batches, plan_micro_batches
from rl_engines.training import TrainEngine
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


def all_reduce_max(value: int, group: dist.ProcessGroup | None) -> int:
    """The maximum of `value` over the ranks of `group` (the value itself without a group)."""
    if group is None or dist.get_world_size(group) == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return int(tensor.item())


def micro_batches(
    attention_mask: torch.Tensor, max_tokens: int, group: dist.ProcessGroup | None, engine: TrainEngine
) -> list[list[int]]:
    """Row indices of each micro-batch under `max_tokens` for `engine`: as many on every rank of `group` (a
    collective) when the engine runs micro-batches in lockstep, else this rank's own fewest.

    Args:
        attention_mask: `(B, T)` 0/1 valid-token mask of this rank's batch.
        max_tokens: token budget of one micro-batch.
    """
    if not engine.micro_batches_in_lockstep:
        group = None
    counts = attention_mask.sum(dim=-1).tolist()
    needed = all_reduce_max(min_num_micro_batches(counts, max_tokens), group)
    if needed > len(counts):
        raise StepDataError(
            f"another rank needs {needed} micro-batches under micro_batch.max_tokens_per_micro_batch={max_tokens}, "
            f"more than the {len(counts)} samples this rank holds; raise the engine's max_tokens_per_micro_batch"
        )
    return plan_micro_batches(counts, max_tokens, num_micro_batches=needed).micro_batches


def mini_batch_rows(num_samples: int, num_mini_batches: int) -> list[list[int]]:
    """Contiguous row ranges of `num_mini_batches` equal mini-batches of a rank's `num_samples` samples."""
    if num_samples % num_mini_batches:
        raise StepDataError(
            f"{num_samples} samples on this rank do not split into batch.mini_batches_per_step={num_mini_batches} "
            "equal mini-batches; the batch plan should have refused this, so a node changed the sample count"
        )
    size = num_samples // num_mini_batches
    return [list(range(start, start + size)) for start in range(0, num_samples, size)]
