"""What a transformers model's attention layers look like, for layouts and masks that depend on it."""

from __future__ import annotations

from typing import Any

FULL_ATTENTION = "full_attention"
SDPA = "sdpa"


def full_attention_only(config: Any) -> bool:
    """Whether every layer of a model with this (text) config attends to the whole context (no sliding window)."""
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return all(kind == FULL_ATTENTION for kind in layer_types)
    return getattr(config, "sliding_window", None) is None


def takes_boolean_4d_mask(config: Any) -> bool:
    """Whether a model with this config can be handed a ready `(B, 1, Q, K)` boolean mask (True: attend) in place
    of its padding mask: SDPA kernels take one as is, and with every layer attending to the whole context one
    mask serves every layer (eager attention adds a float mask; flash and flex kernels build their own)."""
    return getattr(config, "_attn_implementation", None) == SDPA and full_attention_only(config)
