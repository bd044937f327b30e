"""A warm start's inputs, loaded and checked before the engine is built: the tokenizer and the training,
validation and held-out rows (the embedded dataset is written first when no file is configured)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rl_recipes.sft._config import SFTConfig
from rl_recipes.sft._data import SFTExample, encode_examples, split_validation
from rl_recipes.sft._sources import data_files, resolve_tokenizer
from rl_recipes.tasks import MathSample, load_math_dataset


@dataclass(frozen=True)
class SFTData:
    """What a warm start trains on and scores."""

    tokenizer: Any
    examples: list[SFTExample]
    """The training rows as token ids."""
    validation: list[MathSample]
    """Training rows held back and scored every `eval_every` steps to decide early stopping."""
    heldout: list[MathSample]
    """Rows scored after the last step; empty without held-out rows."""

    def total_steps(self, config: SFTConfig) -> int:
        """The optimizer steps `config` asks for over these rows."""
        return config.num_steps(len(self.examples))


def load_sft_data(config: SFTConfig) -> SFTData:
    """The tokenizer and the rows of `config`, each checked (files, eos token, row lengths) before any training."""
    train_path, heldout_path = data_files(config)
    tokenizer = resolve_tokenizer(config)
    train_rows, validation = split_validation(load_math_dataset(train_path), config.validation_size, config.seed)
    examples = encode_examples(train_rows, tokenizer, config.max_length)
    heldout = load_math_dataset(heldout_path) if heldout_path is not None else []
    return SFTData(tokenizer, examples, validation, heldout)
