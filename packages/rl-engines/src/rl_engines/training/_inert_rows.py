"""Rows whose loss is identically zero take no part in the backward.

A GRPO group whose samples all scored alike has advantage 0 on every token, and a loss that is a multiple of the
advantage (PPO's clipped surrogate without KL or entropy terms) gives those rows a zero loss and a zero gradient
whatever the model outputs: their backward multiplies zeros through every layer. A batch that marks such rows (the
sample field `inert_rows`, `(B,)` bool, which the actor role sets from its loss's registered property; the engine
does not judge losses) lets the engine split each micro-batch: the other rows run forward and
backward as before, the inert rows run their forward without autograd (their log-probs, entropy and values are
still computed and reported), and the loss sees the merged `(B, T)` outputs, so its value and metrics are those
of the whole micro-batch. The gradient equals the whole micro-batch's up to floating-point reduction order (the
matmuls see fewer rows); the loss normaliser still counts every row, as it is computed from the step's batch.

Only where a forward runs no collective (one process, or whole replicas under `data_parallel="ddp"`): an FSDP2
forward all-gathers parameters, so ranks with different splits would run different numbers of collectives.
"""

from __future__ import annotations

import torch

from rl_core.schema import INERT_ROWS
from rl_engines.training._errors import BatchError
from rl_engines.training._forward import forward_micro_batch
from rl_engines.training._micro_batches import select_rows
from rl_engines.training._packing import InputLayout
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec


def inert_mask(micro_batch: Batch) -> torch.Tensor | None:
    """The micro-batch's inert rows `(B,)` bool as its `inert_rows` field marks them, or None when it has no such
    field or no row is inert."""
    inert = micro_batch.get(INERT_ROWS)
    if inert is None:
        return None
    rows = next(iter(micro_batch.values())).shape[0]
    if inert.dtype != torch.bool or tuple(inert.shape) != (rows,):
        raise BatchError(
            f"the batch's {INERT_ROWS!r} must be a ({rows},) bool tensor, got {inert.dtype} {tuple(inert.shape)}; "
            "mark each row True or False"
        )
    return inert if bool(inert.any()) else None


def _merge(
    live: torch.Tensor | None, frozen: torch.Tensor | None, active: torch.Tensor, idle: torch.Tensor, rows: int
) -> torch.Tensor | None:
    """`(rows, ...)` with the live rows' outputs (carrying their gradient) at `active` and the frozen ones at `idle`."""
    if live is None or frozen is None:
        return None
    out = live.new_zeros((rows, *live.shape[1:]))
    out = out.index_put((idle.to(out.device),), frozen)
    return out.index_put((active.to(out.device),), live)


def forward_without_inert_grad(
    network: torch.nn.Module,
    micro_batch: Batch,
    inert: torch.Tensor,
    spec: ForwardSpec,
    *,
    input_layout: InputLayout,
    chunk_size: int,
) -> ForwardOutput:
    """`forward_micro_batch` of `micro_batch`, its `inert: (B,)` rows computed without autograd.

    At least one row keeps its graph (the first, when all are inert), so the micro-batch's loss can still run its
    backward and every parameter gets a (zero) gradient, as the collectives after it expect."""
    rows = inert.shape[0]
    inert = inert.clone()
    if bool(inert.all()):
        inert[0] = False
    active, idle = (~inert).nonzero().squeeze(-1), inert.nonzero().squeeze(-1)
    device = inert.device  # the micro-batch's: `select_rows` only picks rows here
    live = forward_micro_batch(
        network,
        select_rows(micro_batch, active.tolist(), device),
        spec,
        input_layout=input_layout,
        chunk_size=chunk_size,
    )
    with torch.no_grad():
        frozen = forward_micro_batch(
            network,
            select_rows(micro_batch, idle.tolist(), device),
            spec,
            input_layout=input_layout,
            chunk_size=chunk_size,
        )
    return ForwardOutput(*(_merge(a, b, active, idle, rows) for a, b in zip(live, frozen, strict=True)))
