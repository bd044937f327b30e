"""A character tokenizer for the 128-token conformance model, so the server can take and answer text in tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

EOS, UNK = "<eos>", "<unk>"


def char_tokenizer(vocab_size: int = 128) -> Any:
    """Token i is the character chr(i) for 0 < i < vocab_size - 1; token 0 is `<eos>` and the last is `<unk>`
    (both special, so `skip_special_tokens` drops them). Decoding joins the pieces, so ASCII text round-trips."""
    vocab = {EOS: 0, **{chr(i): i for i in range(1, vocab_size - 1)}, UNK: vocab_size - 1}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS, unk_token=UNK, clean_up_tokenization_spaces=False
    )


def save_char_tokenizer(folder: Path, vocab_size: int = 128) -> Path:
    """`char_tokenizer(vocab_size)` saved in `folder` (for `--tokenizer`); returns the folder."""
    char_tokenizer(vocab_size).save_pretrained(str(folder))
    return folder
