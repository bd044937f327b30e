"""The model-input layouts of a micro-batch: packed (one row, no padding), padded (its rows, trimmed) and
shared-prefix (padded, with a prompt several rows share run once; `_shared_prefix.py`).

Packed: the micro-batch's valid tokens are concatenated into a single row whose `position_ids` restart at
0 for each sequence, with `attention_mask=None` and no KV cache, so transformers separates the sequences
from the positions alone (checked-facts.md: with a mask or a cache it silently does not). Padded: the
rows as given, with the columns that are padding in every row cut off. Both layouts also give, for
every target token, the flat index of the hidden state that predicts it, so the heads and the scatter
back to `(B, T)` are shared and the layouts agree.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import torch

from rl_core.schema import ATTENTION_MASK, INPUT_IDS, POSITION_IDS, RESPONSE_MASK
from rl_engines.training._errors import BatchError
from rl_engines.training._shared_prefix import PrefixInputs, shared_prefix_layout
from rl_engines.training._types import Batch


class InputLayout(enum.Enum):
    """How the engine lays out its micro-batches (`TrainEngineConfig` and the model decide)."""

    PACKED = "packed"
    PADDED = "padded"
    SHARED_PREFIX = "shared_prefix"
    """Padded, with a prefix that several rows share run once; plain padded when no two rows share one."""


class ModelInputs(NamedTuple):
    """A micro-batch laid out for the model, and where its outputs go.

    Attributes:
        input_ids: `(R, L)` int64 token ids fed to the model (the rows' continuations under a shared prefix).
        position_ids: `(R, L)` int64 positions.
        attention_mask: `(R, L)` padding mask (`(R, Wp + L)` under a shared prefix), or None for the packed layout.
        source: `(N,)` int64 index into the model's `(R * L, H)` hidden states of the state predicting each target
            (into the `shared_prefix_hidden` table under a shared prefix).
        labels: `(N,)` int64 target token ids.
        rows: `(N,)` int64 row of each target in the micro-batch's `(B, T)` grid.
        cols: `(N,)` int64 column of each target in that grid.
        shape: `(B, T)` of the micro-batch.
        prefix: the distinct prefixes under the shared-prefix layout, else None.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor | None
    source: torch.Tensor
    labels: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor
    shape: tuple[int, int]
    prefix: PrefixInputs | None = None


def _mask(batch: Batch) -> torch.Tensor:
    input_ids = batch[INPUT_IDS]
    if ATTENTION_MASK not in batch:
        return torch.ones_like(input_ids, dtype=torch.bool)
    mask = batch[ATTENTION_MASK]
    if mask.shape != input_ids.shape:
        raise BatchError(f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(input_ids.shape)}")
    return mask.bool()


def target_mask(batch: Batch, response_only: bool) -> torch.Tensor:
    """`(B, T)` bool: valid tokens preceded by a valid token, within `response_mask` when asked and present."""
    mask = _mask(batch)
    preceded = torch.zeros_like(mask)
    preceded[:, 1:] = mask[:, :-1]
    targets = mask & preceded
    if response_only and RESPONSE_MASK in batch:
        response = batch[RESPONSE_MASK]
        if response.shape != mask.shape:
            raise BatchError(f"response_mask has shape {tuple(response.shape)}, input_ids {tuple(mask.shape)}")
        targets &= response.bool()
    return targets


def _default_positions(mask: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, ... over each row's valid tokens (0 on padding), as the rollout numbers them."""
    return (mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def padded_inputs(batch: Batch, response_only: bool) -> ModelInputs:
    """The padded layout of `batch` (rows kept; all-padding columns at the start cut, and at the end every column
    after the last one whose hidden state predicts a target)."""
    input_ids = batch[INPUT_IDS]
    mask = _mask(batch)
    targets = target_mask(batch, response_only)
    positions = batch[POSITION_IDS] if POSITION_IDS in batch else _default_positions(mask)
    used_cols = mask.any(dim=0).nonzero()
    rows, cols = targets.nonzero(as_tuple=True)
    first, last = (int(used_cols[0]), int(used_cols[-1]) + 1) if len(used_cols) else (0, 1)
    if len(cols):
        last = int(cols.max())  # the target in the last column is predicted from the column before it
    width = last - first
    return ModelInputs(
        input_ids=input_ids[:, first:last],
        position_ids=positions[:, first:last],
        attention_mask=mask[:, first:last].long(),
        source=rows * width + (cols - 1 - first),
        labels=input_ids[rows, cols],
        rows=rows,
        cols=cols,
        shape=(input_ids.shape[0], input_ids.shape[1]),
    )


def _has_default_positions(batch: Batch, mask: torch.Tensor, defaults: torch.Tensor) -> bool:
    """Whether the batch's position ids (if any) equal `defaults` (`_default_positions(mask)`) on valid tokens."""
    if POSITION_IDS not in batch:
        return True
    return torch.equal(batch[POSITION_IDS][mask].to(defaults.dtype), defaults[mask])


def shared_prefix_inputs(batch: Batch, response_only: bool) -> ModelInputs | None:
    """The shared-prefix layout of `batch`, or None where it does not apply (no two rows share a prefix, no
    `response_mask`, position ids other than the default numbering, a row with a gap or without a prefix)."""
    mask = _mask(batch)
    if RESPONSE_MASK not in batch or not _has_default_positions(batch, mask, _default_positions(mask)):
        return None
    input_ids = batch[INPUT_IDS]
    layout = shared_prefix_layout(input_ids, mask, batch[RESPONSE_MASK].bool())
    if layout is None:
        return None
    rows, cols = target_mask(batch, response_only).nonzero(as_tuple=True)
    return ModelInputs(
        input_ids=layout.continuation_ids,
        position_ids=layout.continuation_positions,
        attention_mask=layout.attention_mask,
        source=layout.table_index[rows, cols - 1],
        labels=input_ids[rows, cols],
        rows=rows,
        cols=cols,
        shape=(input_ids.shape[0], input_ids.shape[1]),
        prefix=layout.prefixes,
    )


def lay_out(batch: Batch, response_only: bool, layout: InputLayout) -> ModelInputs:
    """`batch` in `layout` (the shared-prefix layout falling back to padded rows where it does not apply)."""
    if layout is InputLayout.PACKED:
        return packed_inputs(batch, response_only)
    if layout is InputLayout.SHARED_PREFIX and (shared := shared_prefix_inputs(batch, response_only)) is not None:
        return shared
    return padded_inputs(batch, response_only)


def packed_inputs(batch: Batch, response_only: bool) -> ModelInputs:
    """The packed layout of `batch`: every row's valid tokens, one after another, in a single row."""
    input_ids = batch[INPUT_IDS]
    mask = _mask(batch)
    targets = target_mask(batch, response_only)
    positions = _default_positions(mask)
    if not _has_default_positions(batch, mask, positions):
        raise BatchError(
            "the packed layout numbers each sequence's tokens 0, 1, 2, ... but the batch's position_ids differ on "
            "valid tokens; set MicroBatchConfig.packing=False to use the batch's position_ids"
        )
    flat_mask = mask.reshape(-1)
    # Packed index of every (row, col): its rank among the valid tokens in row-major order.
    packed_index = flat_mask.long().cumsum(dim=0) - 1
    rows, cols = targets.nonzero(as_tuple=True)
    width = input_ids.shape[1]
    return ModelInputs(
        input_ids=input_ids.reshape(-1)[flat_mask].unsqueeze(0),
        position_ids=positions.reshape(-1)[flat_mask].unsqueeze(0),
        attention_mask=None,
        source=packed_index[rows * width + cols - 1],
        labels=input_ids[rows, cols],
        rows=rows,
        cols=cols,
        shape=(input_ids.shape[0], width),
    )
