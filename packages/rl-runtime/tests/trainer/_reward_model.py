"""A tiny one-label reward model folder for the reward-model tests: a 1-layer Llama sequence classifier and a
tokenizer that reads one character a token (`<pad>` 0, `<eos>` 1, then each piece in order from 2)."""

from __future__ import annotations

from pathlib import Path

import torch


def save_tiny_reward_model(path: Path, pieces: str, *, max_positions: int = 32) -> Path:
    """Write the model (vocab_size `len(pieces) + 2`, seeded with 0) and its tokenizer to `path`; `path`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{piece: index + 2 for index, piece in enumerate(pieces)}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>").save_pretrained(str(path))
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=max_positions, num_labels=1, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForSequenceClassification(config).save_pretrained(str(path))
    return path
