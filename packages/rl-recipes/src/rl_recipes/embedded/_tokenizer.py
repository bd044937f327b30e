"""A tokenizer for the embedded default, built locally with `tokenizers`: template words plus single characters."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from rl_core.chat import TOOL_CHAT_TEMPLATE

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
"""Special tokens; ids 0..3 in this order."""
WORD_TOKENS = ("Question", "Answer", "What", "####", " is ", " = ")
"""Multi-character pieces of the prompt template and answers, one token each to keep sequences short."""
CHARACTERS = tuple(string.digits + string.ascii_letters + string.punctuation + " \n")
"""Every other piece is one character; text outside these maps to `<unk>`."""
TOOL_WORD_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "Tools:",
    " calculator",
    '{"name": "calculator", "arguments": {"expression": "',
    '"}}',
)
"""The tool-calling variant's extra pieces (`build_embedded_tokenizer(tools=True)`): the tags and the calculator
call's fixed JSON, one token each, so a whole episode fits the tiny model's context. Appended after every other
piece, so the ids of the plain tokenizer's pieces are the same in both."""
EMBEDDED_TOOLS_TOKENIZER = "embedded-tools"
"""The name a workflow's or task's `tokenizer` setting gives for `build_embedded_tokenizer(tools=True)` (built in
code, so it exists before any warm start has written a folder)."""


def _vocabulary(extra: tuple[str, ...] = ()) -> dict[str, int]:
    pieces = [*SPECIAL_TOKENS, *WORD_TOKENS, *CHARACTERS, *extra]
    return {piece: index for index, piece in enumerate(dict.fromkeys(pieces))}


def build_embedded_tokenizer(*, tools: bool = False) -> PreTrainedTokenizerFast:
    """Build the embedded tokenizer: each template word is a token, everything else one token per character.

    Decoding concatenates pieces (no added spaces, no clean-up), so every in-alphabet string round-trips
    exactly. Wrapped as a transformers fast tokenizer so `generate` and `decode` work. With `tools`, the
    `TOOL_WORD_TOKENS` are added (after the plain vocabulary) and the tokenizer carries
    `rl_recipes.workflows.TOOL_CHAT_TEMPLATE` as its chat template, which renders `tools=` and tool messages.
    """
    from transformers import PreTrainedTokenizerFast

    extra = TOOL_WORD_TOKENS if tools else ()
    words = "|".join(re.escape(word) for word in (*extra, *WORD_TOKENS))
    tokenizer = Tokenizer(models.WordLevel(vocab=_vocabulary(extra), unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(f"{words}|[\\s\\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        clean_up_tokenization_spaces=False,
        padding_side="left",  # decoder-only generation pads on the left
    )
    if tools:
        wrapped.chat_template = TOOL_CHAT_TEMPLATE
    return wrapped


def save_embedded_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: str | Path) -> Path:
    """Save `tokenizer` into `folder` (HF layout) and return the folder."""
    folder = Path(folder)
    tokenizer.save_pretrained(str(folder))
    return folder


def load_embedded_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved with `save_embedded_tokenizer` from `folder`."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))
