"""The embedded default's tiny causal LM: a Llama config sized for a CPU, built in code.

Llama, not Qwen2: transformers 5 loads the tokenizer of a `qwen2` folder as its own byte-level BPE
`Qwen2Tokenizer` whatever `tokenizer_config.json` says, which silently re-tokenizes the embedded
character-level vocabulary; for a `llama` folder `AutoTokenizer` honours the saved tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rl_recipes.embedded._tokenizer import build_embedded_tokenizer

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

HIDDEN_SIZE = 64
INTERMEDIATE_SIZE = 256
NUM_LAYERS = 2
NUM_HEADS = 4
NUM_KV_HEADS = 2
MAX_POSITIONS = 128
"""Long enough for the template plus a 3-digit problem and its answer, with room to spare."""


def embedded_model_config(tokenizer: PreTrainedTokenizerFast | None = None) -> LlamaConfig:
    """The tiny Llama config; its vocabulary and special ids come from `tokenizer` (default: the embedded one)."""
    from transformers import LlamaConfig

    tokenizer = tokenizer if tokenizer is not None else build_embedded_tokenizer()
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=_token_id(tokenizer.pad_token_id, "pad_token_id"),
        bos_token_id=_token_id(tokenizer.bos_token_id, "bos_token_id"),
        eos_token_id=_token_id(tokenizer.eos_token_id, "eos_token_id"),
    )


def _token_id(value: object, name: str) -> int | None:
    """One special token's id (transformers types it as any id-or-token form)."""
    if value is None or isinstance(value, int):
        return value
    raise TypeError(f"the embedded tokenizer's {name} must be one token id or None, got {value!r}")


def build_embedded_model(seed: int, tokenizer: PreTrainedTokenizerFast | None = None) -> LlamaForCausalLM:
    """A freshly initialised tiny Llama causal LM; the same seed gives the same weights. Global RNG is untouched."""
    from transformers import LlamaForCausalLM

    config = embedded_model_config(tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    return model
