"""The trainer's forward of Llama-family decoders (`rl_engines._llama_family`), computed from the model's own
parameters with torch functional ops, in the padded and the shared-prefix layouts.

It gives the hidden states transformers' forward gives, with gradients reaching the same parameters, without the
mask building, cache objects, per-module hooks and output records around the arithmetic, and, on CPU, with short
attention spans computed as two batched matmuls: the fused CPU attention kernel pays a fixed cost that exceeds the
arithmetic when a span holds a few dozen keys (a 2-layer, 64-wide model's padded rows of 30 tokens: 0.6 ms against
1.1 ms forward and backward per layer).

A padding query attends to itself as well as to its row's earlier valid tokens, so no softmax runs over nothing and
no NaN reaches the backward; its output is never read.
"""

from __future__ import annotations

import logging

import torch

from rl_engines._llama_family import Layer, config_head_dim, linear, mlp_residual, queries_and_keys, rms_norm, rotate
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


def _causal(queries: int, keys: int, device: torch.device) -> torch.Tensor:
    """`(Q, K)` bool: query i sees keys up to `K - Q + i` (the queries are the last Q of the keys)."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(keys - queries)


class FastForward:
    """Final hidden states of a supported causal LM; see the module doc."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._model = model
        self._eps = float(model.config.rms_norm_eps)
        self._head_dim = config_head_dim(model.config)

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> FastForward | None:
        """A forward for the causal LM `model`, or None (with the reason logged) when its architecture or training
        behaviour is not exactly the one computed here."""
        reason = unsupported_architecture(model)
        if reason is None and float(getattr(model.config, "attention_dropout", 0.0) or 0.0) != 0.0:
            reason = f"attention dropout is {model.config.attention_dropout}"
        if reason is not None:
            logger.info("training through transformers' forward: %s", reason)
            return None
        return cls(model)

    def _layers(self) -> list[Layer]:
        # Read through the modules at every forward: loading, offloading or broadcasting may have replaced them.
        return [Layer.of(layer) for layer in self._model.model.layers]

    def _embed(self, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Token embeddings and the rotary `cos, sin: (B, 1, L, D)` of `input_ids, positions: (B, L)`."""
        decoder = self._model.model
        hidden = decoder.embed_tokens(input_ids)
        cos, sin = decoder.rotary_emb(hidden, positions)
        return hidden, cos.unsqueeze(1), sin.unsqueeze(1)

    def _layer(
        self,
        layer: Layer,
        hidden: torch.Tensor,
        rotary: tuple[torch.Tensor, torch.Tensor],
        attention: _Attention,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One decoder layer over `hidden: (B, L, H)`, its queries attending to `past` keys and values (each
        `(B, kv_heads, K0, D)`) and then its own; returns the new hidden states and its own keys and values."""
        rows, length, _ = hidden.shape
        x = rms_norm(hidden, layer.input_norm, self._eps)
        q, k = queries_and_keys(layer, x, (rows, length, -1, self._head_dim), self._eps)
        q, k = rotate(q.transpose(1, 2), *rotary), rotate(k.transpose(1, 2), *rotary)
        v = linear(x, layer.v).view(rows, length, -1, self._head_dim).transpose(1, 2)
        keys, values = (k, v) if past is None else (torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2))
        out = attention(q, keys, values, layer.scaling)
        hidden = hidden + linear(out.transpose(1, 2).reshape(rows, length, -1), layer.o)
        return mlp_residual(layer, hidden, self._eps), k, v

    def _final(self, hidden: torch.Tensor) -> torch.Tensor:
        """`(B * L, H)` final-normed hidden states."""
        hidden = rms_norm(hidden, self._model.model.norm.weight, self._eps)
        return hidden.reshape(-1, hidden.shape[-1])

    def _padded(
        self, layers: list[Layer], input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """The last layer's hidden states `(B, L, H)` of padded rows, and each layer's keys and values."""
        hidden, cos, sin = self._embed(input_ids, positions)
        length = input_ids.shape[1]
        causal = _causal(length, length, input_ids.device)
        eye = torch.eye(length, dtype=torch.bool, device=input_ids.device)
        attention = _Attention(causal & mask.bool()[:, None, :] | eye, hidden.dtype)
        caches = []
        for layer in layers:
            hidden, k, v = self._layer(layer, hidden, (cos, sin), attention)
            caches.append((k, v))
        return hidden, caches

    def hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`(B * L, H)` final hidden states of padded rows `input_ids, position_ids, attention_mask: (B, L)`."""
        hidden, _ = self._padded(self._layers(), input_ids, position_ids, attention_mask)
        return self._final(hidden)

    def shared_prefix_hidden(
        self,
        prefixes: PrefixInputs,
        continuation_ids: torch.Tensor,
        continuation_positions: torch.Tensor,
        attention_mask: torch.Tensor,
    ) -> torch.Tensor:
        """`(P * Wp + B * Wc, H)`: the final hidden states of the prefixes, then of the rows' continuations; the
        arguments as `rl_engines.training._shared_prefix.shared_prefix_hidden` takes them."""
        layers = self._layers()
        prefix_hidden, caches = self._padded(layers, prefixes.input_ids, prefixes.position_ids, prefixes.attention_mask)
        hidden, cos, sin = self._embed(continuation_ids, continuation_positions)
        steps, keys = continuation_ids.shape[1], attention_mask.shape[1]
        causal = _causal(steps, keys, continuation_ids.device)
        attention = _Attention(causal & attention_mask.bool()[:, None, :], hidden.dtype)
        rows = prefixes.row_prefix
        for layer, (k, v) in zip(layers, caches, strict=True):
            hidden, _, _ = self._layer(layer, hidden, (cos, sin), attention, past=(k[rows], v[rows]))
        return torch.cat([self._final(prefix_hidden), self._final(hidden)])
