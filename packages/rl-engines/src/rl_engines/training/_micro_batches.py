"""Checking the caller's micro-batch plan against the batch and the token budget, and slicing micro-batches.

The engine does not plan micro-batches (rl-coordinator does, under the same budget); it only refuses a
plan that would silently drop or repeat samples, overflow the budget, or desynchronise the ranks' collectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_engines.training._errors import BatchError, MicroBatchError
from rl_engines.training._fsdp import ProcessLayout, all_reduce_min_max
from rl_engines.training._types import Batch

_SHOWN_LENGTHS = 8
"""Sequence lengths quoted in an over-budget message before it elides the rest."""


def sequence_lengths(batch: Batch) -> torch.Tensor:
    """`(B,)` int64 valid tokens per row (`attention_mask` sums; the full width without a mask), after checking
    that every entry of the batch is a tensor sharing `input_ids`' first dim."""
    if "input_ids" not in batch:
        raise BatchError(f"the batch has no 'input_ids'; keys found: {sorted(batch)}")
    input_ids = batch["input_ids"]
    if input_ids.dim() != 2:
        raise BatchError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
    size = input_ids.shape[0]
    for key, tensor in batch.items():
        if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 or tensor.shape[0] != size:
            found = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise BatchError(f"batch[{key!r}] must be a tensor with the batch's first dim {size}, got {found}")
    if "attention_mask" not in batch:
        return torch.full((input_ids.shape[0],), input_ids.shape[1], dtype=torch.int64)
    return batch["attention_mask"].bool().sum(dim=-1).cpu()


def check_micro_batches(
    micro_batches: Sequence[Sequence[int]], batch: Batch, max_tokens: int, layout: ProcessLayout
) -> list[list[int]]:
    """The plan as lists after checking it covers `batch` exactly once and respects `max_tokens`.

    A micro-batch of several sequences may hold at most `max_tokens` valid tokens; a single longer
    sequence runs alone. Under FSDP2 every rank must run the same number of micro-batches (its collectives
    pair up per forward), which costs one small all-reduce to check; replicas (`data_parallel="ddp"`) meet
    once a step and may run any number.
    """
    lengths = sequence_lengths(batch)
    batch_size = len(lengths)
    plan = [[int(i) for i in rows] for rows in micro_batches]
    flat = sorted(i for rows in plan for i in rows)
    if flat != list(range(batch_size)):
        seen = set(flat)
        missing = sorted(set(range(batch_size)) - seen)[:_SHOWN_LENGTHS]
        repeated = sorted({i for i in flat if flat.count(i) > 1})[:_SHOWN_LENGTHS]
        outside = sorted(i for i in seen if not 0 <= i < batch_size)[:_SHOWN_LENGTHS]
        raise MicroBatchError(
            f"micro_batches must cover the batch's rows 0..{batch_size - 1} exactly once; missing {missing}, "
            f"repeated {repeated}, out of range {outside}"
        )
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise MicroBatchError(f"rows {empty[:_SHOWN_LENGTHS]} have no valid tokens (attention_mask all 0); drop them")
    for index, rows in enumerate(plan):
        row_lengths = [int(lengths[i]) for i in rows]
        if len(rows) > 1 and sum(row_lengths) > max_tokens:
            shown = row_lengths[:_SHOWN_LENGTHS] + (["..."] if len(rows) > _SHOWN_LENGTHS else [])
            raise MicroBatchError(
                f"micro-batch {index} holds {sum(row_lengths)} tokens (sequence lengths {shown}) over "
                f"MicroBatchConfig.max_tokens_per_micro_batch={max_tokens}; plan micro-batches under that budget "
                "(a sequence longer than the budget goes alone) or raise the budget"
            )
    if not layout.sharded:
        return plan
    fewest, most = all_reduce_min_max(len(plan), layout)
    if fewest != most:
        raise MicroBatchError(
            f"ranks run between {fewest} and {most} micro-batches (this rank {len(plan)}); FSDP2 needs the same "
            "number on every rank: plan them together (rl_coordinator plan_micro_batches_all_ranks)"
        )
    return plan


def select_rows(batch: Batch, rows: Sequence[int], device: torch.device) -> dict[str, torch.Tensor]:
    """The micro-batch's tensors (every `(B, ...)` entry indexed by `rows`) on `device`; the batch was checked
    by `check_micro_batches`."""
    index = torch.as_tensor(rows, dtype=torch.int64)
    return {key: tensor[index.to(tensor.device)].to(device, non_blocking=True) for key, tensor in batch.items()}
