"""Supervised rows as token ids (prompt, then response + eos), padded batches, and the seeded row order."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_core.schema import ATTENTION_MASK, INPUT_IDS, RESPONSE_MASK
from rl_recipes.sft._errors import SFTError
from rl_recipes.tasks import MathSample, build_prompt, encode_prompt, response_text

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTExample:
    """One training row: the prompt's token ids and the response's (ending with eos unless cut), and which response
    tokens the loss covers."""

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    loss_mask: tuple[int, ...] | None = None
    """1/0 per response token: 0 keeps a token out of the loss (a tool's result inside a multi-turn response);
    None covers every response token."""

    def __post_init__(self) -> None:
        if self.loss_mask is not None and len(self.loss_mask) != len(self.response_ids):
            raise SFTError(
                f"SFTExample.loss_mask has {len(self.loss_mask)} entries for {len(self.response_ids)} response "
                "tokens; give one 0/1 per response token, or None for all"
            )

    @property
    def length(self) -> int:
        """Tokens in the row."""
        return len(self.prompt_ids) + len(self.response_ids)


def encode_example(sample: MathSample, tokenizer: Any, max_length: int) -> SFTExample | None:
    """The row of `sample`: prompt ids, then `response_text(answer)` ids plus eos, cut to `max_length` tokens.

    Prompt and response are tokenized separately, as generation sees them (the response continues the
    prompt's ids). Returns None when the prompt alone leaves no room for a response token.
    """
    prompt_ids = encode_prompt(build_prompt(sample.question, tokenizer), tokenizer)
    text = response_text(sample.answer, tokenizer)
    encoded = tokenizer(text, add_special_tokens=False)["input_ids"]  # not-a-sample-field: tokenizer output key
    response_ids = [*encoded, tokenizer.eos_token_id]
    room = max_length - len(prompt_ids)
    if room < 1:
        return None
    return SFTExample(tuple(prompt_ids), tuple(response_ids[:room]))


def encode_examples(samples: Sequence[MathSample], tokenizer: Any, max_length: int) -> list[SFTExample]:
    """Every sample's row (see `encode_example`); rows whose prompt fills `max_length` are dropped, and both
    the dropped and the cut rows are counted in a warning."""
    examples: list[SFTExample] = []
    dropped = cut = 0
    for sample in samples:
        example = encode_example(sample, tokenizer, max_length)
        if example is None:
            dropped += 1
            continue
        cut += example.response_ids[-1] != tokenizer.eos_token_id
        examples.append(example)
    if dropped or cut:
        logger.warning(
            "SFTConfig.max_length=%d: dropped %d rows whose prompt fills it, cut the response of %d rows",
            max_length,
            dropped,
            cut,
        )
    if not examples:
        raise SFTError(
            f"every one of the {len(samples)} training rows has a prompt of >= SFTConfig.max_length={max_length} "
            "tokens; raise max_length"
        )
    return examples


def collate(examples: Sequence[SFTExample], pad_token_id: int) -> dict[str, torch.Tensor]:
    """A right-padded batch: `input_ids`, `attention_mask` and `response_mask` (1 on the response tokens the loss
    covers: all of them, or those of the row's `loss_mask`), all `(B, T)` int64 with `T` the longest row."""
    width = max(example.length for example in examples)
    input_ids = torch.full((len(examples), width), pad_token_id, dtype=torch.int64)
    attention_mask = torch.zeros((len(examples), width), dtype=torch.int64)
    response_mask = torch.zeros((len(examples), width), dtype=torch.int64)
    for row, example in enumerate(examples):
        prompt, length = len(example.prompt_ids), example.length
        input_ids[row, :length] = torch.tensor(example.prompt_ids + example.response_ids)
        attention_mask[row, :length] = 1
        if example.loss_mask is None:
            response_mask[row, prompt:length] = 1
        else:
            response_mask[row, prompt:length] = torch.tensor(example.loss_mask, dtype=torch.int64)
    return {INPUT_IDS: input_ids, ATTENTION_MASK: attention_mask, RESPONSE_MASK: response_mask}


class RowOrder:
    """An endless stream of row indices: a fresh seeded permutation of all rows per epoch."""

    def __init__(self, num_rows: int, seed: int) -> None:
        if num_rows < 1:
            raise ValueError(f"num_rows must be >= 1, got {num_rows}")
        self._num_rows = num_rows
        self._generator = torch.Generator().manual_seed(seed)
        self._pending: list[int] = []

    def take(self, count: int) -> list[int]:
        """The next `count` row indices (crossing into the next epoch's permutation when this one runs out)."""
        while len(self._pending) < count:
            self._pending += torch.randperm(self._num_rows, generator=self._generator).tolist()
        taken, self._pending = self._pending[:count], self._pending[count:]
        return taken


VALIDATION_SEED_OFFSET = 1
"""The validation rows are drawn with `seed + 1`, so they do not follow the row order's first permutation."""


def split_validation(samples: Sequence[MathSample], size: int, seed: int) -> tuple[list[MathSample], list[MathSample]]:
    """(training rows, `size` validation rows drawn with `seed`); both keep the file's order."""
    if size == 0:
        return list(samples), []
    if size >= len(samples):
        raise SFTError(
            f"SFTConfig.validation_size={size} leaves no training rows out of {len(samples)}; "
            f"use fewer than {len(samples)} (0 for none)"
        )
    generator = torch.Generator().manual_seed(seed + VALIDATION_SEED_OFFSET)
    chosen = set(torch.randperm(len(samples), generator=generator)[:size].tolist())
    train = [sample for i, sample in enumerate(samples) if i not in chosen]
    return train, [sample for i, sample in enumerate(samples) if i in chosen]
