"""Prefill and decode steps for Llama-family decoders (`rl_engines._llama_family`), computed from the model's own
parameters with torch functional ops.

For one new token per row, transformers' forward spends most of a small model's step outside arithmetic: mask and
cache bookkeeping, per-module hooks and output records; this step skips them (bench/README.md, "Figures behind the
docstrings", has the timings). A model is taken only when its architecture matches the family's layer exactly
(`FastDecoder.for_model`); any other model decodes through transformers.

The decoder holds the model's `Parameter` objects, as `HFEngine`'s weight updates do: an update copies into a
parameter or swaps its `.data`, so every step reads the current weights, also after an update between two steps of a
batch (looking them up through the modules each step had cost a twentieth of the step).
"""

from __future__ import annotations

import logging
from typing import cast

import torch
import torch.nn.functional as F

from rl_engines._llama_family import (
    Layer,
    LlamaFamilyModel,
    config_head_dim,
    linear,
    mlp_residual,
    padded_pattern,
    queries_and_keys,
    rms_norm,
    rotary,
    rotate,
    unsupported,
)

logger = logging.getLogger(__name__)

INITIAL_DECODE_COLUMNS = 64
"""Columns a batch's KV cache first holds beyond its prompts; it doubles when full."""


class PrefillKV:
    """Each layer's keys and values `(P, kv_heads, W, head_dim)` after `FastDecoder.prefill`: what a transformers
    `DynamicCache` holds after the forward's prefill, with the same row selection.

    `lineage: (P,)` int64 names each row's source row: rows with equal lineage are copies of one row (a prompt that
    several requests share, run once), so their keys, values and logits are identical. It starts distinct."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        self.keys, self.values = keys, values
        self.lineage = torch.arange(keys[0].shape[0] if keys else 0, device=keys[0].device if keys else None)

    def batch_select_indices(self, index: torch.Tensor) -> None:
        """Keep (or repeat) the rows at `index: (B,)`."""
        self.keys = [k.index_select(0, index) for k in self.keys]
        self.values = [v.index_select(0, index) for v in self.values]
        self.lineage = self.lineage.index_select(0, index)


class KVState:
    """The keys and values `(B, kv_heads, capacity, head_dim)` of each layer for the rows still decoding, and an
    additive attention bias `(B, capacity)` (0 where a row attends, -inf at padding and unfilled columns).

    Columns `[0, width)` are filled. Each step writes one column in place; the buffers double when full, so a
    step never copies the whole cache (concatenating a step's keys onto the cache had been a large share of a small
    model's step).

    Rows too: `keys`, `values` and `bias` are the first `rows` rows of buffers that may hold more. Rows that leave
    (`select`) are overwritten in place by the rows that move into their places, and the buffers' rows past the
    kept ones stay allocated for rows that join (`extend`): a retirement that moves the last rows into the holes,
    and a join that fits the spare rows, copy those rows only, not the whole cache. A spare row's stale keys and
    values are finite numbers under a -inf bias until a joining row overwrites its bias and prompt columns."""

    def __init__(self, prefill: PrefillKV, mask: torch.Tensor, capacity: int) -> None:
        """Take over a prefill of rows with padding mask `mask: (B, W)`; `capacity` bounds the columns the rows can
        ever fill."""
        self.width = mask.shape[-1]
        self.capacity = capacity
        allocated = min(capacity, self.width + INITIAL_DECODE_COLUMNS)
        bias = torch.full(mask.shape, float("-inf"), dtype=prefill.keys[0].dtype, device=mask.device)
        self._adopt(
            [self._widen(k, allocated) for k in prefill.keys],
            [self._widen(v, allocated) for v in prefill.values],
            self._widen(bias.masked_fill_(mask.bool(), 0.0), allocated, float("-inf")),
            mask.shape[0],
        )

    def _adopt(self, keys: list[torch.Tensor], values: list[torch.Tensor], bias: torch.Tensor, rows: int) -> None:
        """Take `keys, values, bias` as the buffers, their first `rows` rows live."""
        self._keys, self._values, self._bias, self.rows = keys, values, bias, rows
        self.keys = [k[:rows] for k in keys]
        self.values = [v[:rows] for v in values]
        self.bias = bias[:rows]

    @staticmethod
    def _widen(filled: torch.Tensor, columns: int, fill: float = 0.0) -> torch.Tensor:
        """`filled` copied into a new tensor of `columns` along its column dimension (2 for caches, 1 for bias)."""
        dim = 2 if filled.dim() == 4 else 1
        shape = list(filled.shape)
        shape[dim] = columns
        out = filled.new_full(shape, fill)
        out.narrow(dim, 0, filled.shape[dim]).copy_(filled)
        return out

    def append(self) -> int:
        """Open the next column for every row (attended); its index."""
        if self.width == self.bias.shape[1]:
            if self.width >= self.capacity:
                raise ValueError(f"the KV cache is full at {self.capacity} columns")
            columns = min(self.capacity, 2 * self.width)
            self._adopt(
                [self._widen(k[:, :, : self.width], columns) for k in self.keys],
                [self._widen(v[:, :, : self.width], columns) for v in self.values],
                self._widen(self.bias[:, : self.width], columns, float("-inf")),
                self.rows,
            )
        self.bias[:, self.width] = 0.0
        self.width += 1
        return self.width - 1

    def select(self, index: torch.Tensor, drop: int = 0) -> None:
        """Keep only the rows at `index: (B',)` (in that order), and drop the first `drop` columns (which none of them
        attends). Only the rows whose position changes are copied, in place (see the class doc)."""
        keys, values, bias = self._keys, self._values, self._bias
        if drop:
            keys = [k[:, :, drop:] for k in keys]
            values = [v[:, :, drop:] for v in values]
            bias = bias[:, drop:]
            self.width -= drop
            self.capacity -= drop
        if len(index) > bias.shape[0]:  # repeats rows past the buffers' own: new buffers
            self._adopt(
                [k.index_select(0, index) for k in keys],
                [v.index_select(0, index) for v in values],
                bias.index_select(0, index),
                len(index),
            )
            return
        moved = [(p, r) for p, r in enumerate(index.tolist()) if p != r]
        if moved:
            dst = torch.tensor([p for p, _ in moved], dtype=torch.long, device=bias.device)
            src = torch.tensor([r for _, r in moved], dtype=torch.long, device=bias.device)
            for buffer in (*keys, *values, bias):  # gathered before written: any order of rows is safe
                buffer.index_copy_(0, dst, buffer.index_select(0, src))
        self._adopt(keys, values, bias, len(index))

    def extend(self, prefill: PrefillKV, mask: torch.Tensor) -> int:
        """Append the rows of a prefill with padding mask `mask: (n, W)`, their last prompt column aligned with the
        batch's last filled column; returns by how many columns the existing rows moved right (when W is wider
        than the batch: 0 otherwise)."""
        prompt_width = mask.shape[-1]
        shift = max(0, prompt_width - self.width)
        joining = mask.shape[0]
        bias = torch.full(mask.shape, float("-inf"), dtype=self.bias.dtype, device=mask.device)
        bias = bias.masked_fill_(mask.bool(), 0.0)
        if not shift and self.rows + joining <= self._bias.shape[0]:  # into the spare rows, in place
            offset, start = self.width - prompt_width, self.rows
            for buffer, new in zip([*self._keys, *self._values], [*prefill.keys, *prefill.values], strict=True):
                buffer.narrow(0, start, joining).narrow(2, offset, prompt_width).copy_(new)
            rows = self._bias.narrow(0, start, joining).fill_(float("-inf"))
            rows.narrow(1, offset, prompt_width).copy_(bias)
            self._adopt(self._keys, self._values, self._bias, start + joining)
            return 0
        allocated = self.bias.shape[1] + shift
        keys, values, old_bias = self.keys, self.values, self.bias
        if shift:
            keys = [self._place(k, allocated, shift) for k in keys]
            values = [self._place(v, allocated, shift) for v in values]
            old_bias = self._place(old_bias, allocated, shift, float("-inf"))
            self.width += shift
            self.capacity += shift
        offset = self.width - prompt_width
        new_keys = [self._place(k, allocated, offset) for k in prefill.keys]
        new_values = [self._place(v, allocated, offset) for v in prefill.values]
        new_bias = self._place(bias, allocated, offset, float("-inf"))
        self._adopt(
            [torch.cat([old, new]) for old, new in zip(keys, new_keys, strict=True)],
            [torch.cat([old, new]) for old, new in zip(values, new_values, strict=True)],
            torch.cat([old_bias, new_bias]),
            self.rows + joining,
        )
        return shift

    @staticmethod
    def _place(filled: torch.Tensor, columns: int, offset: int, fill: float = 0.0) -> torch.Tensor:
        """`filled` copied into a new tensor of `columns` along its column dimension, starting at `offset`."""
        dim = 2 if filled.dim() == 4 else 1
        shape = list(filled.shape)
        shape[dim] = columns
        out = filled.new_full(shape, fill)
        out.narrow(dim, offset, filled.shape[dim]).copy_(filled)
        return out


class FastDecoder:
    """Prefill and decode steps of a supported model; see the module doc."""

    def __init__(self, model: LlamaFamilyModel, eps: float, head_dim: int) -> None:
        decoder = model.model
        self._eps, self._head_dim = eps, head_dim
        self._embedding, self._rotary = decoder.embed_tokens.weight, decoder.rotary_emb
        self._layers = [Layer.of(layer) for layer in decoder.layers]
        self._norm, self._head = decoder.norm.weight, (model.lm_head.weight, model.lm_head.bias)

    @property
    def vocab(self) -> int:
        """Above every token id a step takes or its logits give (the embedding's and the LM head's rows)."""
        return max(self._embedding.shape[0], self._head[0].shape[0])

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> FastDecoder | None:
        """A decoder for `model`, or None (with the reason logged) when its architecture is not exactly the one
        computed here."""
        reason = unsupported(model)
        if reason is not None:
            logger.info("decoding through transformers' forward: %s", reason)
            return None
        checked = cast(LlamaFamilyModel, model)
        return cls(checked, float(checked.config.rms_norm_eps), config_head_dim(checked.config))

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> tuple[PrefillKV, torch.Tensor]:
        """Run left-padded prompts through the model: their keys and values, and the next-token logits `(P, V)` (in
        the model's dtype) after each prompt's last token.

        `ids, mask, positions: (P, W)` int64: tokens, 0/1 padding mask and positions. Attention is causal over
        each prompt's own tokens; a padding position attends to itself only, so no softmax runs over nothing."""
        prompts, width = ids.shape
        head_dim, eps = self._head_dim, self._eps
        hidden = F.embedding(ids, self._embedding)
        cos, sin = self._rotary(hidden, positions)
        cos, sin = rotary(cos.unsqueeze(1), sin.unsqueeze(1))
        allowed = padded_pattern(mask).unsqueeze(1)
        keys, values = [], []
        for layer in self._layers:
            x = rms_norm(hidden, layer.input_norm, eps)
            q, k = queries_and_keys(layer, x, (prompts, width, -1, head_dim), eps)
            keys.append(rotate(k.transpose(1, 2), cos, sin))
            values.append(linear(x, layer.v).view(prompts, width, -1, head_dim).transpose(1, 2))
            out = F.scaled_dot_product_attention(
                rotate(q.transpose(1, 2), cos, sin),
                keys[-1],
                values[-1],
                attn_mask=allowed,
                scale=layer.scaling,
                enable_gqa=True,
            )
            hidden = hidden + linear(out.transpose(1, 2).reshape(prompts, width, -1), layer.o)
            hidden = mlp_residual(layer, hidden, eps)
        return PrefillKV(keys, values), linear(rms_norm(hidden[:, -1], self._norm, eps), self._head)

    def step(
        self,
        state: KVState,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        shared: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Append one token per row at `positions` and return its next-token logits.

        `tokens, positions: (B,)` int64; `state` grows by one column. Returns `(B, V)` in the model's dtype.

        With `shared = (source, inverse)` the state's `R` rows hold only `B` distinct histories (rows whose prompt
        and tokens so far are equal: their cache rows are equal): `tokens, positions` are the `B` distinct inputs,
        `source: (B,)` the cache row each is computed from, `inverse: (R,)` the input each cache row takes. The
        linears, norms and MLP then run on the `B` distinct rows and only attention on all `R` (each row over its
        own cache row); the logits are the distinct rows'. Every op is row-wise, so a row's logits are those it
        computes unshared: bitwise at one intra-op thread (for GEMMs of at least `SharedRows.MIN_ROWS` rows); with
        several, a GEMM splits its rows between threads and a row's rounding depends on its share, as it already
        does when rows leave the batch."""
        rows, head_dim, eps = tokens.shape[0], self._head_dim, self._eps
        hidden = F.embedding(tokens, self._embedding)
        cos, sin = rotary(*self._rotary(hidden, positions.unsqueeze(-1)))
        column = state.append()
        width = column + 1
        bias = state.bias[:, None, None, :width]
        cache_rows, kv_heads = state.bias.shape[0], state.keys[0].shape[1]
        pairs = cache_rows * kv_heads
        for i, layer in enumerate(self._layers):
            x = rms_norm(hidden, layer.input_norm, eps)
            q, k = queries_and_keys(layer, x, (rows, -1, head_dim), eps)
            q, k, v = rotate(q, cos, sin), rotate(k, cos, sin), linear(x, layer.v).view(rows, -1, head_dim)
            if shared is not None:  # index_select: a third cheaper than indexing on these small tensors
                q, k, v = q.index_select(0, shared[1]), k.index_select(0, shared[1]), v.index_select(0, shared[1])
            state.keys[i].select(2, column).copy_(k)
            state.values[i].select(2, column).copy_(v)
            # Each key-value head serves a group of consecutive query heads (transformers' repeat_kv): one product
            # per row and key-value head over the filled columns, by `bmm` on views (what `matmul` of the 4-d views
            # runs, without its reshaping ops around it).
            keys = state.keys[i].flatten(0, 1).narrow(1, 0, width)
            values = state.values[i].flatten(0, 1).narrow(1, 0, width)
            scores = torch.bmm(q.view(pairs, -1, head_dim), keys.transpose(1, 2))
            scores = scores.view(cache_rows, kv_heads, -1, width).mul_(layer.scaling).add_(bias)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attended = torch.bmm(probs.view(pairs, -1, width), values).view(cache_rows, -1)
            if shared is not None:
                attended = attended.index_select(0, shared[0])
            hidden = hidden + linear(attended, layer.o)
            hidden = mlp_residual(layer, hidden, eps)
        return linear(rms_norm(hidden, self._norm, eps), self._head)
