"""`SFTConfig`: defaults, step counting, loading from overrides, and every rejection naming its field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rl_recipes.sft import EMBEDDED_MODEL, SFTConfig
from rl_recipes.sft._config import DEFAULT_STEPS
from rl_runtime.config import ConfigError, load_config


def test_defaults_are_the_embedded_warm_start() -> None:
    config = SFTConfig()
    assert config.model == EMBEDDED_MODEL and config.uses_embedded_model
    assert config.train_file is None and config.heldout_file is None and config.tokenizer is None
    assert config.num_steps(2000) == DEFAULT_STEPS
    assert (config.validation_size, config.stop_at_exact_match) == (200, 0.2)  # stop at a modest accuracy
    assert not SFTConfig(model="/models/qwen").uses_embedded_model


def test_num_steps_from_steps_or_epochs() -> None:
    assert SFTConfig(steps=7).num_steps(1000) == 7
    assert SFTConfig(epochs=2, batch_size=32).num_steps(100) == 7  # ceil(200 / 32)
    assert SFTConfig(epochs=0.01, batch_size=32).num_steps(100) == 1


def test_loads_from_overrides_like_every_run_config() -> None:
    config = load_config(SFTConfig, None, ["lr=0.01", "steps=5", "train_file=data/train.jsonl"])
    assert (config.lr, config.steps, config.train_file) == (0.01, 5, "data/train.jsonl")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("train_file", "", "a non-empty string"),
        ("heldout_file", " ", "a non-empty string"),
        ("model", "", "a non-empty string"),
        ("tokenizer", 3, "a non-empty string"),
        ("steps", 0, "an int >= 1"),
        ("steps", 2.5, "an int >= 1"),
        ("epochs", 0, "a finite number > 0"),
        ("epochs", math.inf, "a finite number > 0"),
        ("batch_size", 0, "an int >= 1"),
        ("batch_size", True, "an int >= 1"),
        ("lr", 0.0, "a finite number > 0"),
        ("lr", math.nan, "a finite number > 0"),
        ("lr_schedule", "linear", r"one of \['constant', 'cosine'\]"),
        ("warmup_steps", -1, "an int >= 0"),
        ("weight_decay", -0.1, "a finite number >= 0"),
        ("max_length", 1, "an int >= 2"),
        ("max_tokens_per_micro_batch", 0, "an int >= 1"),
        ("seed", -1, "an int >= 0"),
        ("eval_every", -5, "an int >= 0"),
        ("eval_max_new_tokens", 0, "an int >= 1"),
        ("validation_size", -1, "an int >= 0"),
        ("stop_at_exact_match", 0.0, r"a number in \(0, 1\] or null"),
        ("stop_at_exact_match", 1.5, r"a number in \(0, 1\] or null"),
        ("packing", "yes", "true or false"),
        ("output_dir", "", "a non-empty string"),
        ("log_sinks", "jsonl", "a list of log sink names"),
        ("log_sinks", ("jsonl", "jsnl"), "registered log sinks, any of"),
        ("log_sinks", ("jsonl", "jsonl"), "distinct log sink names"),
    ],
)
def test_rejects_bad_field(field: str, value: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=f"{field}: expected {expected}") as caught:
        SFTConfig(**{field: value})
    assert [problem.path for problem in caught.value.problems] == [field]


def test_rejects_early_stopping_without_periodic_evaluation() -> None:
    with pytest.raises(ConfigError, match=r"eval_every: expected an int > 0 when stop_at_exact_match is set"):
        SFTConfig(eval_every=0)
    assert SFTConfig(eval_every=0, stop_at_exact_match=None).eval_every == 0


def test_rejects_steps_and_epochs_together() -> None:
    with pytest.raises(ConfigError, match=r"steps: expected at most one of steps and epochs.*remove one of them"):
        SFTConfig(steps=10, epochs=1.0)


def test_log_sinks_default_to_the_metrics_file_and_load_like_rl_ones() -> None:
    assert SFTConfig().log_sinks == ("jsonl",)
    assert load_config(SFTConfig, None, ["log_sinks=[console,jsonl]"]).log_sinks == ("console", "jsonl")
    with pytest.raises(ConfigError, match="did you mean 'jsonl'"):
        SFTConfig(log_sinks=("jsnl",))
