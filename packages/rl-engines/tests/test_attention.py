"""Which models take a ready boolean mask, and which attend to the whole context in every layer."""

from __future__ import annotations

from transformers import LlamaConfig, MistralConfig, Qwen2Config

from rl_engines._attention import full_attention_only, takes_boolean_4d_mask

SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}


def _with_attention(config, implementation: str):
    config._attn_implementation = implementation
    return config


def test_full_attention_follows_layer_types_or_the_sliding_window() -> None:
    assert full_attention_only(Qwen2Config(**SMALL))
    assert not full_attention_only(Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=8, max_window_layers=0))
    assert full_attention_only(MistralConfig(**SMALL, sliding_window=None))
    assert not full_attention_only(MistralConfig(**SMALL, sliding_window=8))


def test_only_sdpa_with_full_attention_takes_a_boolean_mask() -> None:
    assert takes_boolean_4d_mask(_with_attention(LlamaConfig(**SMALL), "sdpa"))
    assert not takes_boolean_4d_mask(_with_attention(LlamaConfig(**SMALL), "eager"))
    assert not takes_boolean_4d_mask(_with_attention(MistralConfig(**SMALL, sliding_window=8), "sdpa"))
