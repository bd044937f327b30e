"""The trainer's forward of Llama-family decoders (`rl_engines._llama_family`), computed from the model's own
parameters with torch functional ops, in the padded and the shared-prefix layouts.

It gives the hidden states transformers' forward gives, with gradients reaching the same parameters, without the
mask building, cache objects, per-module hooks and output records around the arithmetic, and, on CPU, with short
attention spans computed as two batched matmuls: the fused CPU attention kernel pays a fixed cost that exceeds the
arithmetic when a span holds a few dozen keys (figures for a 2-layer, 64-wide model: bench/README.md).

A padding query attends to itself as well as to its row's earlier valid tokens, so no softmax runs over nothing and
no NaN reaches the backward; its output is never read.
"""

from __future__ import annotations

import logging
from typing import Protocol, cast

import torch

from rl_engines._llama_family import (
    Layer,
    LlamaFamilyModel,
    causal_pattern,
    config_head_dim,
    linear,
    mlp_residual,
    padded_pattern,
    queries_and_keys,
    rms_norm,
    rotary,
    rotate,
)
from rl_engines._llama_family import unsupported as unsupported_architecture
from rl_engines.training._shared_prefix import PrefixInputs

logger = logging.getLogger(__name__)

MATMUL_ATTENTION_MAX_KEYS = 64
"""Longest key span attended with two matmuls on CPU; longer spans take the fused kernel, which is faster there."""


def _bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`allowed: (B, Q, K)` bool as an additive bias `(B, 1, 1, Q, K)`: 0 where attended, -inf elsewhere."""
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))
    return bias[:, None, None]


class _Attention:
    """One micro-batch's attention pattern `(B, Q, K)`, in the form its kernel takes."""

    def __init__(self, allowed: torch.Tensor, dtype: torch.dtype) -> None:
        self.by_matmul = allowed.device.type == "cpu" and allowed.shape[-1] <= MATMUL_ATTENTION_MAX_KEYS
        self.mask = _bias(allowed, dtype) if self.by_matmul else allowed[:, None]

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
        """`q: (B, H, Q, D)` attending to `k, v: (B, kv_heads, K, D)` -> `(B, H, Q, D)`; each key-value head serves a
        group of consecutive query heads (transformers' repeat_kv)."""
        if not self.by_matmul:
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=self.mask, scale=scaling, enable_gqa=True
            )
        rows, heads, queries, width = q.shape
        kv_heads = k.shape[1]
        grouped = q.reshape(rows, kv_heads, heads // kv_heads * queries, width)
        scores = torch.matmul(grouped, k.transpose(-1, -2)).view(rows, kv_heads, heads // kv_heads, queries, -1)
        probs = torch.softmax(scores * scaling + self.mask, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs.view(rows, kv_heads, heads // kv_heads * queries, -1), v)
        return out.view(rows, heads, queries, width)


class _Spans(Protocol):
    """How the flat tokens of a micro-batch attend: queries, keys and values `(N, heads, D)` -> outputs
    `(N, heads * D)`."""

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor: ...


class _Rows:
    """Flat tokens that are `rows` rows of `width`, each attending within itself."""

    def __init__(self, rows: int, width: int, attention: _Attention) -> None:
        self.rows, self.width, self.attention = rows, width, attention

    def grid(self, x: torch.Tensor) -> torch.Tensor:
        """`(rows * width, heads, D)` as `(rows, heads, width, D)`."""
        return x.view(self.rows, self.width, x.shape[1], x.shape[2]).transpose(1, 2)

    def flat(self, out: torch.Tensor) -> torch.Tensor:
        """`(rows, heads, width, D)` as `(rows * width, heads * D)`."""
        return out.transpose(1, 2).reshape(self.rows * self.width, -1)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
        return self.flat(self.attention(self.grid(q), self.grid(k), self.grid(v), scaling))


class _PrefixedRows:
    """Flat tokens that are the prefixes' rows, then the continuations' rows; a continuation attends to its
    prefix's keys and values (row `row_prefix[b]` of the prefixes) before its own."""

    def __init__(self, prefixes: _Rows, continuations: _Rows, row_prefix: torch.Tensor) -> None:
        self.prefixes, self.continuations, self.row_prefix = prefixes, continuations, row_prefix

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
        split = self.prefixes.rows * self.prefixes.width
        prefix_k, prefix_v = self.prefixes.grid(k[:split]), self.prefixes.grid(v[:split])
        prefix_out = self.prefixes.attention(self.prefixes.grid(q[:split]), prefix_k, prefix_v, scaling)
        rows, continuations = self.row_prefix, self.continuations
        keys = torch.cat([prefix_k[rows], continuations.grid(k[split:])], dim=2)
        values = torch.cat([prefix_v[rows], continuations.grid(v[split:])], dim=2)
        out = continuations.attention(continuations.grid(q[split:]), keys, values, scaling)
        return torch.cat([self.prefixes.flat(prefix_out), continuations.flat(out)])


class FastForward:
    """Final hidden states of a supported causal LM; see the module doc."""

    def __init__(self, model: LlamaFamilyModel) -> None:
        self._model = model
        self._eps = float(model.config.rms_norm_eps)
        self._head_dim = config_head_dim(model.config)

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> FastForward | None:
        """A forward for the causal LM `model`, or None (with the reason logged) when its architecture or training
        behaviour is not exactly the one computed here."""
        reason = unsupported_architecture(model)
        dropout = getattr(getattr(model, "config", None), "attention_dropout", 0.0)
        if reason is None and float(dropout or 0.0) != 0.0:
            reason = f"attention dropout is {dropout}"
        if reason is not None:
            logger.info("training through transformers' forward: %s", reason)
            return None
        return cls(cast(LlamaFamilyModel, model))

    def _layers(self) -> list[Layer]:
        # Read through the modules at every forward: loading, offloading or broadcasting may have replaced them.
        return [Layer.of(layer) for layer in self._model.model.layers]

    def _run(self, input_ids: torch.Tensor, positions: torch.Tensor, spans: _Spans) -> torch.Tensor:
        """`(N, H)` final-normed hidden states of the flat tokens `input_ids, positions: (N,)`, attending as `spans`
        lays them out. Every per-token part of a layer runs once over all N tokens, whatever the spans."""
        decoder = self._model.model
        hidden = decoder.embed_tokens(input_ids)
        cos, sin = decoder.rotary_emb(hidden[None], positions[None])
        cos, sin = rotary(cos[0].unsqueeze(1), sin[0].unsqueeze(1))
        tokens, eps = input_ids.shape[0], self._eps
        for layer in self._layers():
            x = rms_norm(hidden, layer.input_norm, eps)
            q, k = queries_and_keys(layer, x, (tokens, -1, self._head_dim), eps)
            v = linear(x, layer.v).view(tokens, -1, self._head_dim)
            out = spans(rotate(q, cos, sin), rotate(k, cos, sin), v, layer.scaling)
            hidden = hidden + linear(out, layer.o)
            hidden = mlp_residual(layer, hidden, eps)
        return rms_norm(hidden, decoder.norm.weight, eps)

    def hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`(B * L, H)` final hidden states of padded rows `input_ids, position_ids, attention_mask: (B, L)`."""
        rows, width = input_ids.shape
        spans = _Rows(rows, width, _Attention(padded_pattern(attention_mask), self._dtype()))
        return self._run(input_ids.reshape(-1), position_ids.reshape(-1), spans)

    def shared_prefix_hidden(
        self,
        prefixes: PrefixInputs,
        continuation_ids: torch.Tensor,
        continuation_positions: torch.Tensor,
        attention_mask: torch.Tensor,
    ) -> torch.Tensor:
        """`(P * Wp + B * Wc, H)`: the final hidden states of the prefixes, then of the rows' continuations; the
        arguments as `rl_engines.training._shared_prefix.shared_prefix_hidden` takes them."""
        dtype = self._dtype()
        prefix_count, prefix_width = prefixes.input_ids.shape
        prefix_rows = _Rows(prefix_count, prefix_width, _Attention(padded_pattern(prefixes.attention_mask), dtype))
        steps, keys = continuation_ids.shape[1], attention_mask.shape[1]
        pattern = causal_pattern(steps, keys, continuation_ids.device) & attention_mask.bool()[:, None, :]
        continuation_rows = _Rows(continuation_ids.shape[0], steps, _Attention(pattern, dtype))
        spans = _PrefixedRows(prefix_rows, continuation_rows, prefixes.row_prefix)
        input_ids = torch.cat([prefixes.input_ids.reshape(-1), continuation_ids.reshape(-1)])
        positions = torch.cat([prefixes.position_ids.reshape(-1), continuation_positions.reshape(-1)])
        return self._run(input_ids, positions, spans)

    def _dtype(self) -> torch.dtype:
        return self._model.model.embed_tokens.weight.dtype
