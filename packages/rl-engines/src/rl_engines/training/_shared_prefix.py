"""The shared-prefix layout: a prompt that several rows of a micro-batch share (a GRPO group's samples) runs through
the model once, and its KV cache serves each of those rows' continuations.

Two forwards replace the padded one: the distinct prefixes, left-padded, with a KV cache; then every row's
continuation (its tokens from the first response token on), right-padded, attending to its prefix's cached keys and
values, which carry gradient, so the backward sums each row's contribution into the shared prompt. The outputs
equal the padded layout's up to floating-point reduction order. A row's prefix is its valid tokens before the first
response token; the rows' position ids must be the default numbering (0, 1, ... over valid tokens). Every layer
must attend to the whole context (`rl_engines._attention.full_attention_only`): a sliding-window layer's cache
would keep only the window of the prefix.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import torch
from transformers import DynamicCache, PretrainedConfig

from rl_engines._kv_cache import cache_arg


class PrefixInputs(NamedTuple):
    """The distinct prefixes of a micro-batch and which one each row continues.

    Attributes:
        input_ids: `(P, Wp)` int64, left-padded.
        position_ids: `(P, Wp)` int64.
        attention_mask: `(P, Wp)` int64 padding mask.
        row_prefix: `(B,)` int64 index of each row's prefix.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor
    row_prefix: torch.Tensor


class SharedPrefixLayout(NamedTuple):
    """A micro-batch laid out for `shared_prefix_hidden`.

    Attributes:
        prefixes: the distinct prefixes and which one each row continues.
        continuation_ids: `(B, Wc)` int64, each row's tokens from its first response token on, right-padded, up to
            the longest continuation's last-but-one token.
        continuation_positions: `(B, Wc)` int64.
        attention_mask: `(B, Wp + Wc)` int64 of the continuation forward, over its cached prefix and itself.
        table_index: `(B, T)` int64 index of the hidden state at each original position in the table
            `[prefix states (P * Wp), continuation states (B * Wc)]` (meaningful on valid positions followed by a
            valid one: a row's last token, which predicts nothing, may be left out of the continuation).
    """

    prefixes: PrefixInputs
    continuation_ids: torch.Tensor
    continuation_positions: torch.Tensor
    attention_mask: torch.Tensor
    table_index: torch.Tensor


def _span_bounds(mask: torch.Tensor, response: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
    """Per row: first valid column, first response column, one past the last valid column; None unless every row
    has a contiguous valid span with at least one token before its first response token."""
    width = mask.shape[1]
    if not bool(response.any(dim=-1).all()):
        return None
    first_valid = mask.int().argmax(dim=-1)
    end = width - mask.flip(-1).int().argmax(dim=-1)
    first_response = response.int().argmax(dim=-1)
    contiguous = torch.equal(mask.sum(dim=-1), end - first_valid)
    if not contiguous or not bool((first_response > first_valid).all()):
        return None
    return first_valid, first_response, end


def shared_prefix_layout(
    input_ids: torch.Tensor, mask: torch.Tensor, response: torch.Tensor
) -> SharedPrefixLayout | None:
    """The layout of a `(B, T)` micro-batch, or None when no two rows share a prefix (or a row has none).

    Args:
        input_ids: `(B, T)` int64.
        mask: `(B, T)` bool valid tokens.
        response: `(B, T)` bool response tokens.
    """
    bounds = _span_bounds(mask, response & mask)
    if bounds is None:
        return None
    first_valid, first_response, end = bounds
    rows, width = input_ids.shape
    # One host copy of the ids and bounds, sliced in Python: a tensor slice and `tolist` per row cost more.
    spans = zip(input_ids.tolist(), first_valid.tolist(), first_response.tolist(), strict=True)
    keys = [tuple(ids[start:stop]) for ids, start, stop in spans]
    distinct: dict[tuple[int, ...], int] = {}
    row_prefix = torch.tensor([distinct.setdefault(key, len(distinct)) for key in keys], dtype=torch.long)
    if len(distinct) == rows:
        return None
    device = input_ids.device
    row_prefix = row_prefix.to(device)
    prefix_width = max(len(key) for key in distinct)
    prefix_ids = torch.zeros((len(distinct), prefix_width), dtype=torch.long, device=device)
    prefix_mask = torch.zeros_like(prefix_ids)
    for index, key in enumerate(distinct):
        prefix_ids[index, prefix_width - len(key) :] = torch.tensor(key, dtype=torch.long, device=device)
        prefix_mask[index, prefix_width - len(key) :] = 1
    prefix_positions = (prefix_mask.cumsum(dim=-1) - 1).clamp(min=0)

    prefix_len = first_response - first_valid
    continuation_len = end - first_response
    # A row's last token predicts nothing, so the longest continuations' last column need not run.
    steps = torch.arange(max(1, int(continuation_len.max()) - 1), device=device)
    valid = steps < continuation_len[:, None]
    columns = (first_response[:, None] + steps).clamp(max=width - 1)
    continuation_ids = input_ids.gather(1, columns) * valid
    continuation_positions = prefix_len[:, None] + steps
    attention_mask = torch.cat([prefix_mask[row_prefix], valid.long()], dim=-1)

    grid = torch.arange(width, device=device).expand(rows, width)
    in_prefix = (
        row_prefix[:, None] * prefix_width + (grid - first_valid[:, None]) + (prefix_width - prefix_len)[:, None]
    )
    in_continuation = (
        len(distinct) * prefix_width + torch.arange(rows, device=device)[:, None] * steps.numel() + grid
    ) - first_response[:, None]
    table_index = torch.where(grid < first_response[:, None], in_prefix, in_continuation)
    prefixes = PrefixInputs(prefix_ids, prefix_positions, prefix_mask, row_prefix)
    return SharedPrefixLayout(prefixes, continuation_ids, continuation_positions, attention_mask, table_index)


def shared_prefix_hidden(
    base: torch.nn.Module,
    prefixes: PrefixInputs,
    continuation_ids: torch.Tensor,
    continuation_positions: torch.Tensor,
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """`(P * Wp + B * Wc, H)`: the final hidden states of the prefixes, then of the rows' continuations."""
    cache = DynamicCache(config=cast(PretrainedConfig, base.config))  # a transformers model's config
    cache_kwargs = {cache_arg(type(base)): cache}
    prefix_hidden = base(
        input_ids=prefixes.input_ids,
        position_ids=prefixes.position_ids,
        attention_mask=prefixes.attention_mask,
        use_cache=True,
        **cache_kwargs,
    ).last_hidden_state
    cache.batch_select_indices(prefixes.row_prefix)
    continuation_hidden = base(
        input_ids=continuation_ids,
        position_ids=continuation_positions,
        attention_mask=attention_mask,
        use_cache=True,
        **cache_kwargs,
    ).last_hidden_state
    size = prefix_hidden.shape[-1]
    return torch.cat([prefix_hidden.reshape(-1, size), continuation_hidden.reshape(-1, size)])
