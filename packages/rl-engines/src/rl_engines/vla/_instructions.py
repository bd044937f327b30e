"""`instruction_encoder`: the instruction tokenizer of a VLA folder, chosen once from the folder.

A tiny VLA folder (`model_type: tiny_vla`) encodes instructions with its `WordTokenizer` (`word_tokenizer.json`), at
most the model's `max_instruction_len` words; an OpenVLA-OFT checkpoint folder (`model_type: openvla`) with
`OpenVLAPrompt` (OpenVLA's prompt around the instruction, the checkpoint's own tokenizer). The embodied task and the
rollout take the result without asking which kind of VLA it came from.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import torch

from rl_engines.vla._config import TinyVLAConfig
from rl_engines.vla._openvla import OpenVLAPrompt, is_openvla_folder
from rl_engines.vla._word_tokenizer import WordTokenizer


class InstructionEncoder(Protocol):
    """Instruction text <-> the token ids a VLA's forward takes as `instruction_ids`."""

    def encode(self, instruction: str) -> tuple[int, ...]:
        """The token ids of one instruction (no padding)."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of `token_ids` (for logs and samples)."""
        ...


class WordInstructions:
    """A tiny VLA's `WordTokenizer` as an `InstructionEncoder`: unknown words -> `<unk>`, at most `max_length`
    words (a longer instruction raises `VLAError` naming `max_instruction_len`)."""

    def __init__(self, tokenizer: WordTokenizer, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length

    def encode(self, instruction: str) -> tuple[int, ...]:
        """The word ids of `instruction`."""
        ids, mask = self.tokenizer.encode([instruction], max_length=self.max_length)
        return tuple(int(i) for i in ids[0][mask[0].bool()].tolist())

    def decode(self, token_ids: Sequence[int]) -> str:
        """The words of `token_ids`."""
        return self.tokenizer.decode(torch.tensor([list(token_ids)], dtype=torch.int64))[0]


def instruction_encoder(folder: str | os.PathLike[str]) -> InstructionEncoder:
    """The instruction tokenizer of the VLA saved in `folder`: `OpenVLAPrompt` for an OpenVLA-OFT checkpoint,
    else the tiny VLA's `WordTokenizer` (bounded by its config's `max_instruction_len`).

    Raises:
        VLAError: a tiny VLA folder without its `word_tokenizer.json`.
    """
    if is_openvla_folder(folder):
        return OpenVLAPrompt(folder)
    tokenizer = WordTokenizer.from_pretrained(os.fspath(folder))
    return WordInstructions(tokenizer, TinyVLAConfig.from_pretrained(os.fspath(folder)).max_instruction_len)
