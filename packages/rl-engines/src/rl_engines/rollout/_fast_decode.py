"""A decode step for Llama-family decoders, computed from the model's own modules with torch functional ops.

For one new token per row, transformers' forward spends most of a small model's step outside arithmetic: mask and
cache bookkeeping, per-module hooks and output records (0.58 ms of a 2-layer, 64-wide model's step for 32 rows; this
step takes 0.39 ms). The families in `FAST_DECODE_MODEL_TYPES` share one layer: RMSNorm -> attention with rotary
positions (Qwen3 adds an RMSNorm over each head's queries and keys) -> residual -> RMSNorm -> SwiGLU MLP -> residual,
then a final RMSNorm and the LM head. This module computes that function and nothing else, so a model is taken only
when its config and modules match it exactly (`FastDecoder.for_model`); any other model decodes through
transformers.

Weights are read from the modules at every step, never cached: a weight update may replace a parameter's tensor
between two steps of a batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rl_engines._attention import full_attention_only

logger = logging.getLogger(__name__)

FAST_DECODE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral"})
"""Model types whose decoder layer is exactly the one this module computes."""
_SILU = "silu"
_LAYER_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
_ATTENTION_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP_PARTS = ("gate_proj", "up_proj", "down_proj")


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama RMSNorm: normalised in float32, cast back, then scaled."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


def _linear(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    return F.linear(x, layer.weight, layer.bias)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of `x: (B, H, 1, D)` with `cos, sin: (B, 1, 1, D)`."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@dataclass
class KVState:
    """Per-layer keys and values `(B, kv_heads, W, head_dim)` of the rows still decoding."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @classmethod
    def from_cache(cls, cache: Any) -> KVState:
        """Take over the layers of a transformers `DynamicCache` filled by a prefill."""
        return cls([layer.keys for layer in cache.layers], [layer.values for layer in cache.layers])

    def select(self, index: torch.Tensor) -> None:
        """Keep only the rows at `index: (B',)`."""
        self.keys = [k.index_select(0, index) for k in self.keys]
        self.values = [v.index_select(0, index) for v in self.values]


class FastDecoder:
    """One decode step of a supported model; see the module doc."""

    def __init__(self, model: torch.nn.Module, eps: float, head_dim: int) -> None:
        self._model = model
        self._decoder = model.model
        self._eps = eps
        self._head_dim = head_dim

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> FastDecoder | None:
        """A decoder for `model`, or None (with the reason logged) when its architecture is not exactly the one
        computed here."""
        reason = _unsupported(model)
        if reason is not None:
            logger.info("decoding through transformers' forward: %s", reason)
            return None
        config = model.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(model, float(config.rms_norm_eps), int(head_dim))

    def step(self, state: KVState, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Append one token per row and return its next-token logits.

        `tokens, positions: (B,)` int64; `mask: (B, 1, 1, W)` bool, True where a row attends (W counts the new
        token); `state` grows by one position. Returns `(B, V)` in the model's dtype."""
        rows, head_dim, eps = tokens.shape[0], self._head_dim, self._eps
        decoder = self._decoder
        hidden = F.embedding(tokens, decoder.embed_tokens.weight)
        cos, sin = decoder.rotary_emb(hidden, positions.unsqueeze(-1))
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        for i, layer in enumerate(decoder.layers):
            attention = layer.self_attn
            x = _rms_norm(hidden, layer.input_layernorm.weight, eps)
            q = _linear(x, attention.q_proj).view(rows, -1, head_dim)
            k = _linear(x, attention.k_proj).view(rows, -1, head_dim)
            v = _linear(x, attention.v_proj).view(rows, -1, 1, head_dim)
            if hasattr(attention, "q_norm"):
                q = _rms_norm(q, attention.q_norm.weight, eps)
                k = _rms_norm(k, attention.k_norm.weight, eps)
            q = _rotate(q.unsqueeze(2), cos, sin)
            k = _rotate(k.unsqueeze(2), cos, sin)
            state.keys[i] = torch.cat((state.keys[i], k), dim=2)
            state.values[i] = torch.cat((state.values[i], v), dim=2)
            out = F.scaled_dot_product_attention(
                q, state.keys[i], state.values[i], attn_mask=mask, scale=attention.scaling, enable_gqa=True
            )
            hidden = hidden + _linear(out.view(rows, -1), attention.o_proj)
            x = _rms_norm(hidden, layer.post_attention_layernorm.weight, eps)
            mlp = layer.mlp
            hidden = hidden + _linear(F.silu(_linear(x, mlp.gate_proj)) * _linear(x, mlp.up_proj), mlp.down_proj)
        return _linear(_rms_norm(hidden, decoder.norm.weight, eps), self._model.lm_head)


def _unsupported(model: torch.nn.Module) -> str | None:
    """Why `model` cannot take the fast step, or None when it can."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in FAST_DECODE_MODEL_TYPES:
        return f"model type {model_type!r} is not one of {sorted(FAST_DECODE_MODEL_TYPES)}"
    if not full_attention_only(config):
        return "some layers attend to a sliding window"
    if getattr(config, "hidden_act", None) != _SILU:
        return f"the MLP activation is {config.hidden_act!r}, not {_SILU!r}"
    decoder = getattr(model, "model", None)
    parts = ("embed_tokens", "layers", "norm", "rotary_emb")
    if decoder is None or not all(hasattr(decoder, p) for p in parts) or not hasattr(model, "lm_head"):
        return "the model lacks the model.{embed_tokens,layers,norm,rotary_emb} and lm_head modules"
    if len(decoder.layers) != config.num_hidden_layers:
        return "the model runs fewer layers than it holds"
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for layer in decoder.layers:
        if not all(hasattr(layer, p) for p in _LAYER_PARTS):
            return f"a decoder layer lacks one of {_LAYER_PARTS}"
        if not all(hasattr(layer.self_attn, p) for p in _ATTENTION_PARTS) or not hasattr(layer.self_attn, "scaling"):
            return f"an attention module lacks one of {_ATTENTION_PARTS} or its scaling"
        if not all(hasattr(layer.mlp, p) for p in _MLP_PARTS):
            return f"an MLP lacks one of {_MLP_PARTS}"
    with torch.no_grad():
        probe = decoder.embed_tokens.weight[:1].unsqueeze(0)
        cos, _ = decoder.rotary_emb(probe, torch.zeros((1, 1), dtype=torch.long, device=probe.device))
    if cos.shape[-1] != head_dim:
        return f"rotary embeddings cover {cos.shape[-1]} of {head_dim} head dimensions"
    return None
