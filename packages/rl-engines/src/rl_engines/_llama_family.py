"""The decoder layer that Llama-family models share, computed with torch functional ops from the model's own
parameters; the rollout's fast decode and the trainer's fast forward are built on it.

The families in `LLAMA_FAMILY_MODEL_TYPES` share one layer: RMSNorm -> attention with rotary positions (Qwen3 adds
an RMSNorm over each head's queries and keys) -> residual -> RMSNorm -> SwiGLU MLP -> residual, then a final RMSNorm
and the LM head. A model is taken only when its config and modules match that exactly (`unsupported`); any other
model runs through transformers' forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from rl_engines._attention import full_attention_only

LLAMA_FAMILY_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral"})
"""Model types whose decoder layer is exactly the one this module computes."""
_SILU = "silu"
_LAYER_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
_ATTENTION_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP_PARTS = ("gate_proj", "up_proj", "down_proj")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama RMSNorm: normalised in float32, cast back, then scaled."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


Linear = tuple[torch.Tensor, torch.Tensor | None]
"""A linear layer's weight and bias."""


class _Norm(Protocol):
    weight: torch.Tensor


class _SelfAttention(Protocol):
    q_proj: torch.nn.Linear
    k_proj: torch.nn.Linear
    v_proj: torch.nn.Linear
    o_proj: torch.nn.Linear
    scaling: float


class _MLP(Protocol):
    gate_proj: torch.nn.Linear
    up_proj: torch.nn.Linear
    down_proj: torch.nn.Linear


class DecoderLayer(Protocol):
    """A transformers Llama-family decoder layer, as `unsupported` checks it."""

    input_layernorm: _Norm
    self_attn: _SelfAttention
    post_attention_layernorm: _Norm
    mlp: _MLP


class Decoder(Protocol):
    """A transformers Llama-family decoder (`model.model`), as `unsupported` checks it."""

    embed_tokens: torch.nn.Embedding
    layers: Sequence[DecoderLayer]
    norm: _Norm
    rotary_emb: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class LlamaFamilyConfig(Protocol):
    """The config fields of a Llama-family model that the functional computation reads."""

    hidden_size: int
    num_attention_heads: int
    rms_norm_eps: float


class LlamaFamilyModel(Protocol):
    """A transformers Llama-family causal LM for which `unsupported` returned None.

    transformers types its submodules through `torch.nn.Module.__getattr__` (a tensor or a module); this names
    the ones the fast paths read, so a caller casts a model to it once `unsupported` has checked them."""

    model: Decoder
    lm_head: torch.nn.Linear
    config: LlamaFamilyConfig


def linear(x: torch.Tensor, layer: Linear) -> torch.Tensor:
    """`layer` applied to `x`."""
    return F.linear(x, layer[0], layer[1])


def _params(module: torch.nn.Linear) -> Linear:
    return module.weight, module.bias


@dataclass(frozen=True, slots=True)
class Layer:
    """The parameters of one decoder layer."""

    input_norm: torch.Tensor
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    scaling: float
    post_norm: torch.Tensor
    gate: Linear
    up: Linear
    down: Linear

    @classmethod
    def of(cls, layer: DecoderLayer) -> Layer:
        """The parameters of a transformers decoder layer."""
        attention, mlp = layer.self_attn, layer.mlp
        q_norm, k_norm = getattr(attention, "q_norm", None), getattr(attention, "k_norm", None)
        return cls(
            layer.input_layernorm.weight,
            _params(attention.q_proj),
            _params(attention.k_proj),
            _params(attention.v_proj),
            _params(attention.o_proj),
            None if q_norm is None else q_norm.weight,
            None if k_norm is None else k_norm.weight,
            float(attention.scaling),
            layer.post_attention_layernorm.weight,
            _params(mlp.gate_proj),
            _params(mlp.up_proj),
            _params(mlp.down_proj),
        )


def queries_and_keys(layer: Layer, x: torch.Tensor, shape: tuple[int, ...], eps: float) -> tuple[torch.Tensor, ...]:
    """The layer's queries and keys of normed hidden states `x`, viewed as `shape` (ending in heads, head_dim),
    before their rotary embedding."""
    q, k = linear(x, layer.q).view(shape), linear(x, layer.k).view(shape)
    if layer.q_norm is not None and layer.k_norm is not None:  # Qwen3 has both, the others neither
        q, k = rms_norm(q, layer.q_norm, eps), rms_norm(k, layer.k_norm, eps)
    return q, k


def mlp_residual(layer: Layer, hidden: torch.Tensor, eps: float) -> torch.Tensor:
    """`hidden` plus the layer's SwiGLU MLP of its normed self."""
    x = rms_norm(hidden, layer.post_norm, eps)
    return hidden + linear(F.silu(linear(x, layer.gate)) * linear(x, layer.up), layer.down)


def config_head_dim(config: LlamaFamilyConfig) -> int:
    """The attention head width of a model with this config."""
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def rotary(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's rotary tables `cos, sin: (..., D)` as `rotate` takes them: `sin` with its first half negated.

    transformers rotates as `x * cos + rotate_half(x) * sin` with `rotate_half(x) = cat(-x2, x1)`; moving that sign
    onto the table (once per forward or decode step, not once per layer and tensor) leaves a plain half-swap, one
    `roll`. Exact: `(-a) * b == a * (-b)` in IEEE arithmetic, so every rotated value keeps its bits."""
    half = sin.shape[-1] // 2
    return cos, torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of `x: (B, H, D)` with `cos, sin: (B, 1, D)`, or of `x: (B, H, W, D)` with `cos,
    sin: (B, 1, W, D)`; `cos, sin` as `rotary` gives them. Bitwise transformers' `apply_rotary_pos_emb`, in four
    ops instead of seven (the step runs it twice per layer)."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


def causal_pattern(queries: int, keys: int, device: torch.device) -> torch.Tensor:
    """`(Q, K)` bool: query i sees keys up to `K - Q + i` (the queries are the last Q of the keys)."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(keys - queries)


def padded_pattern(mask: torch.Tensor) -> torch.Tensor:
    """`(B, L, L)` bool attention pattern of left-padded rows with padding mask `mask: (B, L)`: causal over valid
    tokens, and every query also sees itself, so a padding query's softmax never runs over nothing (its output is
    never read)."""
    length = mask.shape[1]
    causal = causal_pattern(length, length, mask.device)
    return causal & mask.bool()[:, None, :] | torch.eye(length, dtype=torch.bool, device=mask.device)


def unsupported(model: torch.nn.Module) -> str | None:
    """Why the causal LM `model` is not exactly the architecture computed here, or None when it is."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if config is None or model_type not in LLAMA_FAMILY_MODEL_TYPES:
        return f"model type {model_type!r} is not one of {sorted(LLAMA_FAMILY_MODEL_TYPES)}"
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
    if cos.shape[-1] != config_head_dim(config):
        return f"rotary embeddings cover {cos.shape[-1]} of {config_head_dim(config)} head dimensions"
    return None
