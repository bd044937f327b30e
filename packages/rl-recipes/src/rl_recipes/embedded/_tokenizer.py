"""A tokenizer for the embedded default, built locally with `tokenizers`: template words plus single characters."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
"""Special tokens; ids 0..3 in this order."""
WORD_TOKENS = ("Question", "Answer", "What", "####", " is ", " = ")
"""Multi-character pieces of the prompt template and answers, one token each to keep sequences short."""
CHARACTERS = tuple(string.digits + string.ascii_letters + string.punctuation + " \n")
"""Every other piece is one character; text outside these maps to `<unk>`."""


def _vocabulary() -> dict[str, int]:
    pieces = [*SPECIAL_TOKENS, *WORD_TOKENS, *CHARACTERS]
    return {piece: index for index, piece in enumerate(dict.fromkeys(pieces))}


def build_embedded_tokenizer() -> PreTrainedTokenizerFast:
    """Build the embedded tokenizer: each template word is a token, everything else one token per character.

    Decoding concatenates pieces (no added spaces, no clean-up), so every in-alphabet string round-trips
    exactly. Wrapped as a transformers fast tokenizer so `generate` and `decode` work.
    """
    from transformers import PreTrainedTokenizerFast

    words = "|".join(re.escape(word) for word in WORD_TOKENS)
    tokenizer = Tokenizer(models.WordLevel(vocab=_vocabulary(), unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(f"{words}|[\\s\\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        clean_up_tokenization_spaces=False,
        padding_side="left",  # decoder-only generation pads on the left
    )


def save_embedded_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: str | Path) -> Path:
    """Save `tokenizer` into `folder` (HF layout) and return the folder."""
    folder = Path(folder)
    tokenizer.save_pretrained(str(folder))
    return folder


def load_embedded_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved with `save_embedded_tokenizer` from `folder`."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))
