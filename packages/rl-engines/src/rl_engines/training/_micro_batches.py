"""The engine's own micro-batch plan under its token budget, checking the batch's shape, and slicing micro-batches.

The caller hands the engine a batch (one mini-batch: one optimizer step); the engine splits it into micro-batches
under `MicroBatchConfig.max_tokens_per_micro_batch` with `rl_core.balancing`, so the budget and the lockstep rule
of its collectives stay inside the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core.balancing import min_num_micro_batches
from rl_core.balancing import plan_micro_batches as balanced_micro_batches
from rl_core.schema import ATTENTION_MASK, INPUT_IDS
from rl_engines.training._errors import BatchError, MicroBatchError
from rl_engines.training._fsdp import ProcessLayout, all_gather_rows, collective_device
from rl_engines.training._types import Batch, ForwardOutput

_SHOWN_LENGTHS = 8
"""Row indices quoted in a message before it elides the rest."""


def sequence_lengths(batch: Batch) -> torch.Tensor:
    """`(B,)` int64 valid tokens per row (`attention_mask` sums; the full width without a mask), after checking
    that every entry of the batch is a tensor sharing `input_ids`' first dim."""
    if INPUT_IDS not in batch:
        raise BatchError(f"the batch has no 'input_ids'; keys found: {sorted(batch)}")
    input_ids = batch[INPUT_IDS]
    if input_ids.dim() != 2:
        raise BatchError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
    size = input_ids.shape[0]
    for key, tensor in batch.items():
        if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 or tensor.shape[0] != size:
            found = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise BatchError(f"batch[{key!r}] must be a tensor with the batch's first dim {size}, got {found}")
    if ATTENTION_MASK not in batch:
        return torch.full((input_ids.shape[0],), input_ids.shape[1], dtype=torch.int64)
    return batch[ATTENTION_MASK].bool().sum(dim=-1).cpu()


def plan_micro_batches(
    batch: Batch, max_tokens: int, layout: ProcessLayout, *, costs: torch.Tensor | None = None
) -> list[list[int]]:
    """Row indices of each micro-batch of `batch`: every row once, at most `max_tokens` valid tokens per micro-batch.

    The fewest micro-batches under the budget (a single longer sequence runs alone), balanced by tokens with
    `rl_core.balancing.plan_micro_batches`. Under FSDP2 every rank must run the same number (its collectives pair up
    per micro-batch), so the ranks take the largest of their minimal counts, one small all-gather (a collective);
    replicas (`data_parallel="ddp"`) meet once a step and each plan their own fewest.

    Args:
        batch: this rank's `(B, ...)` tensors; `attention_mask` `(B, T)` gives the valid tokens of each row.
        max_tokens: `MicroBatchConfig.max_tokens_per_micro_batch`.
        layout: the engine's process layout.
        costs: `(B,)` int64 tokens each row costs, in place of its valid tokens (a VLA's trunk tokens).
    """
    # A caller with its own costs (a VLA batch, which has no input_ids) has checked its batch itself.
    lengths = costs if costs is not None else sequence_lengths(batch)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise MicroBatchError(f"rows {empty[:_SHOWN_LENGTHS]} have no valid tokens (attention_mask all 0); drop them")
    counts = lengths.tolist()
    # Rows that fit the budget together need one micro-batch; only a larger batch pays for the minimal packing.
    needed = 1 if sum(counts) <= max_tokens else min_num_micro_batches(counts, max_tokens)
    fewest_rows = len(counts)
    if layout.sharded:
        mine = torch.tensor([needed, fewest_rows], dtype=torch.int64, device=collective_device(layout))
        ranks = all_gather_rows(mine, layout).cpu()
        needed, fewest_rows = int(ranks[:, 0].max()), int(ranks[:, 1].min())
    if needed > fewest_rows:
        # Every rank sees the same figures, so every rank refuses: none is left waiting in a collective.
        raise MicroBatchError(
            f"a rank needs {needed} micro-batches under MicroBatchConfig.max_tokens_per_micro_batch={max_tokens}, "
            f"more than the {fewest_rows} rows the smallest rank holds (FSDP2 runs as many on every rank); raise "
            "max_tokens_per_micro_batch or give every rank more rows"
        )
    if needed == 1:
        # Every row fits one micro-batch: the balanced plan of one part is every row in order, without balancing.
        return [list(range(len(counts)))]
    return balanced_micro_batches(counts, max_tokens, num_micro_batches=needed).micro_batches


def select_rows(batch: Batch, rows: Sequence[int], device: torch.device) -> dict[str, torch.Tensor]:
    """The micro-batch's tensors (every `(B, ...)` entry indexed by `rows`) on `device`; the batch was checked
    by `plan_micro_batches`."""
    index = torch.as_tensor(rows, dtype=torch.int64)
    return {key: tensor[index.to(tensor.device)].to(device, non_blocking=True) for key, tensor in batch.items()}


class OutputRecorder:
    """A batch's per-token outputs assembled from its micro-batches: each micro-batch's detached outputs land at its
    rows of `(B, ...)` float32 tensors of `shape` on `device` (zeros where nothing was computed)."""

    def __init__(self, shape: tuple[int, ...], device: torch.device) -> None:
        self._shape = shape
        self._device = device
        self._merged: dict[str, torch.Tensor] = {}

    def add(self, rows: Sequence[int], outputs: ForwardOutput) -> None:
        """Place `outputs` (each `(len(rows), ...)` or None) at `rows` of the batch."""
        index = torch.as_tensor(rows, device=self._device)
        for name, value in outputs._asdict().items():
            if value is not None:
                target = self._merged.get(name)
                if target is None:
                    target = torch.zeros(self._shape, dtype=torch.float32, device=self._device)
                    self._merged[name] = target
                target[index] = value.detach().to(self._device)

    def merged(self) -> ForwardOutput:
        """The batch's outputs so far, None for an output no micro-batch computed."""
        return ForwardOutput(*(self._merged.get(name) for name in ForwardOutput._fields))
