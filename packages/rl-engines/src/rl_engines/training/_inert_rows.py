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

With `ForwardSpec.inert_outputs` False the inert rows run no forward at all and their outputs are 0, for a loss
whose metrics do not read them either (an on-policy PPO step: its ratio is 1 whatever the log-probs): an inert row
then costs nothing but its share of the loss normaliser.

Under a padded layout (`InputLayout.PADDED`, `SHARED_PREFIX`) the inert rows' forward runs in groups of rows of
similar length (`length_groups`), each padded to its own longest row rather than to the micro-batch's: the rows of a
micro-batch come balanced by tokens, so a short response would otherwise be padded to the longest one beside it
(a heavy-tailed batch computed five times its valid tokens). Each row's outputs are its own whatever rows share
its forward, and without autograd the grouping touches no gradient.

Only where a forward runs no collective (one process, or whole replicas under `data_parallel="ddp"`): an FSDP2
forward all-gathers parameters, so ranks with different splits would run different numbers of collectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core.schema import ATTENTION_MASK, INERT_ROWS
from rl_engines.training._errors import BatchError
from rl_engines.training._forward import forward_micro_batch
from rl_engines.training._micro_batches import select_rows
from rl_engines.training._packing import InputLayout
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec

LENGTH_GROUP_RATIO = 1.5
"""A group of inert rows holds rows up to this many times its shortest row's valid tokens."""
MIN_LENGTH_GROUP_ROWS = 8
"""A group also takes longer rows until it holds this many, so a few rows do not each pay a forward's fixed cost."""


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Indices into `lengths` (valid tokens per row) grouped for padded forwards: ascending by length, a new group
    starting where a row exceeds `LENGTH_GROUP_RATIO` times the current group's shortest row (once the group holds
    `MIN_LENGTH_GROUP_ROWS`); every index once."""
    groups: list[list[int]] = []
    shortest = 0
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if not groups or (len(groups[-1]) >= MIN_LENGTH_GROUP_ROWS and lengths[index] > LENGTH_GROUP_RATIO * shortest):
            groups.append([])
            shortest = lengths[index]
        groups[-1].append(index)
    return groups


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
    """`(rows, ...)` with the live rows' outputs (carrying their gradient) at `active` and the frozen ones at `idle`
    (0 there when `frozen` is None: not computed); None when the forward did not compute this output."""
    if live is None:
        return None
    out = live.new_zeros((rows, *live.shape[1:]))
    if frozen is not None:
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
    """`forward_micro_batch` of `micro_batch`, its `inert: (B,)` rows computed without autograd, or with
    `spec.inert_outputs` False not computed (their outputs 0).

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
    frozen = ForwardOutput(None, None, None)  # with spec.inert_outputs False the idle rows stay 0
    if spec.inert_outputs:
        idle, frozen = _frozen_forward(
            network, micro_batch, idle, spec, input_layout=input_layout, chunk_size=chunk_size
        )
    return ForwardOutput(*(_merge(a, b, active, idle, rows) for a, b in zip(live, frozen, strict=True)))


def _frozen_forward(
    network: torch.nn.Module,
    micro_batch: Batch,
    idle: torch.Tensor,
    spec: ForwardSpec,
    *,
    input_layout: InputLayout,
    chunk_size: int,
) -> tuple[torch.Tensor, ForwardOutput]:
    """The outputs of the micro-batch's `idle: (n,)` rows without autograd, in `length_groups` under a padded layout;
    returns the rows in the order of the outputs' first dim, and the outputs `(n, ...)` (None where not computed)."""
    groups = [idle]
    if input_layout is not InputLayout.PACKED and ATTENTION_MASK in micro_batch:
        lengths = micro_batch[ATTENTION_MASK][idle].bool().sum(dim=-1).tolist()
        groups = [idle[group] for group in length_groups(lengths)]
    with torch.no_grad():
        parts = [
            forward_micro_batch(
                network,
                select_rows(micro_batch, group.tolist(), idle.device),
                spec,
                input_layout=input_layout,
                chunk_size=chunk_size,
            )
            for group in groups
        ]
    if len(parts) == 1:
        return groups[0], parts[0]
    merged = (None if part[0] is None else torch.cat(part) for part in zip(*parts, strict=True))
    return torch.cat(groups), ForwardOutput(*merged)
