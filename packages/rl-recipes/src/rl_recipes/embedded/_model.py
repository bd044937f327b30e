"""The embedded default's tiny causal LM: a Qwen2 config sized for a CPU, built in code."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rl_recipes.embedded._tokenizer import build_embedded_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

HIDDEN_SIZE = 64
INTERMEDIATE_SIZE = 256
NUM_LAYERS = 2
NUM_HEADS = 4
NUM_KV_HEADS = 2
MAX_POSITIONS = 128
"""Long enough for the template plus a 3-digit problem and its answer, with room to spare."""


def embedded_model_config(tokenizer: PreTrainedTokenizerFast | None = None) -> Qwen2Config:
    """The tiny Qwen2 config; its vocabulary and special ids come from `tokenizer` (default: the embedded one)."""
    from transformers import Qwen2Config

    tokenizer = tokenizer if tokenizer is not None else build_embedded_tokenizer()
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def build_embedded_model(seed: int, tokenizer: PreTrainedTokenizerFast | None = None) -> Qwen2ForCausalLM:
    """A freshly initialised tiny Qwen2 causal LM; the same seed gives the same weights. Global RNG is untouched."""
    from transformers import Qwen2ForCausalLM

    config = embedded_model_config(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    return model
