"""`SFTConfig`: the frozen, validated settings of a supervised warm start."""

from __future__ import annotations

import math
from typing import Any

import attrs

from rl_core import nearest_name
from rl_runtime.config import ConfigError, ConfigProblem
from rl_runtime.metrics import LOG_SINKS

EMBEDDED_MODEL = "embedded"
"""`SFTConfig.model` value that builds the embedded default's tiny model (instead of a local HF folder)."""
LR_SCHEDULES = ("constant", "cosine")

# Calibrated on the embedded default (3300 training rows after the 200 validation rows, 2 CPU threads):
# the held-out exact match stays below ~0.1 for a few hundred steps, then climbs steeply (0.2 after
# 650-1350 steps depending on the seed, 0.8-0.95 after 1500, 1.0 on a long run). Stopping at 0.2 on the
# validation rows gave held-out 0.15-0.25 over 4 seeds (wall times in bench/README.md), with sampled
# (T = 1) pass@8 of 0.48-0.69: a modest start with room for RL. Batches of 32 at this rate more often
# memorised the training rows instead (3 of 4 seeds below 0.15 after 1200 steps).
DEFAULT_STEPS = 1500
"""The most steps; with the defaults the run usually stops early at `DEFAULT_STOP_AT_EXACT_MATCH`."""
DEFAULT_EVAL_EVERY = 25
DEFAULT_VALIDATION_SIZE = 200
DEFAULT_STOP_AT_EXACT_MATCH = 0.2
DEFAULT_BATCH_SIZE = 64
DEFAULT_LR = 3e-3
DEFAULT_WARMUP_STEPS = 20
DEFAULT_MAX_LENGTH = 64
"""Prompt plus response plus eos tokens: the embedded prompts and answers take at most ~45."""
DEFAULT_MAX_TOKENS_PER_MICRO_BATCH = 8192
DEFAULT_EVAL_MAX_NEW_TOKENS = 24
"""Enough for the longest embedded answer (` 99 + 99 = 198 #### 198` plus eos)."""
DEFAULT_OUTPUT_DIR = "runs/sft"
DEFAULT_LOG_SINKS = ("jsonl",)
"""`metrics.jsonl` only: the INFO log line every few steps is the console view (a line per step is too many)."""


def _problem(name: str, expected: str, value: object, fix: str = "") -> ConfigError:
    return ConfigError([ConfigProblem(name, expected, f"{value!r} ({type(value).__name__})", fix)])


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(minimum: int) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not _is_int(value) or value < minimum:  # type: ignore[operator]
            raise _problem(attribute.name, f"an int >= {minimum}", value)

    return check


def _optional_int_at_least(minimum: int) -> Any:
    check = _int_at_least(minimum)

    def optional(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(instance, attribute, value)

    return optional


def _is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive_number(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _is_finite_number(value) or not value > 0:  # type: ignore[operator]
        raise _problem(attribute.name, "a finite number > 0", value)


def _non_negative_number(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _is_finite_number(value) or not value >= 0:  # type: ignore[operator]
        raise _problem(attribute.name, "a finite number >= 0", value)


def _optional_positive_number(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _positive_number(instance, attribute, value)


def _optional_fraction(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not _is_finite_number(value) or not 0 < value <= 1):  # type: ignore[operator]
        raise _problem(attribute.name, "a number in (0, 1] or null", value)


def _non_empty_str(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise _problem(attribute.name, "a non-empty string", value)


def _optional_non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _non_empty_str(instance, attribute, value)


def _bool(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise _problem(attribute.name, "true or false", value)


def _log_sinks(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(name, str) for name in value):
        raise _problem(attribute.name, "a list of log sink names", value, "write a YAML list such as [jsonl]")
    for name in value:
        if name not in LOG_SINKS:
            near = nearest_name(name, LOG_SINKS)
            fix = f"did you mean {near!r}?" if near else f"use any of {sorted(LOG_SINKS)}"
            raise _problem(attribute.name, f"registered log sinks, any of {sorted(LOG_SINKS)}", name, fix)
    if len(set(value)) != len(value):
        raise _problem(attribute.name, "distinct log sink names", value, "list each sink once")


def _schedule(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in LR_SCHEDULES:
        raise _problem(attribute.name, f"one of {list(LR_SCHEDULES)}", value)


@attrs.frozen
class SFTConfig:
    """A supervised warm start: train on prompt + answer + eos with the loss on the answer tokens only.

    The defaults are the embedded default's warm start: it writes the synthetic arithmetic dataset into
    `output_dir/data`, builds the tiny model and its tokenizer, and trains until the validation exact
    match reaches `DEFAULT_STOP_AT_EXACT_MATCH` (at most `DEFAULT_STEPS` steps), a modest start that
    leaves RL room to grow. For a plain fixed-length run set `stop_at_exact_match=None`.
    """

    train_file: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """GSM8K-format rows (.jsonl, .parquet or a saved `datasets` folder); None writes the embedded dataset."""
    heldout_file: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """Rows scored by greedy exact match after training; None uses the embedded held-out split when
    `train_file` is None too, and skips the evaluation otherwise."""
    model: str = attrs.field(default=EMBEDDED_MODEL, validator=_non_empty_str)
    """`"embedded"` (the tiny model built in code) or a local Hugging Face model folder."""
    tokenizer: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """A tokenizer folder; None uses the embedded tokenizer (embedded model) or the model folder's."""
    steps: int | None = attrs.field(default=None, validator=_optional_int_at_least(1))
    """Optimizer steps; exclusive with `epochs`; both None means `DEFAULT_STEPS`."""
    epochs: float | None = attrs.field(default=None, validator=_optional_positive_number)
    """Passes over the training rows (rounded up to whole steps); exclusive with `steps`."""
    batch_size: int = attrs.field(default=DEFAULT_BATCH_SIZE, validator=_int_at_least(1))
    """Rows per optimizer step over all ranks (a multiple of the world size)."""
    lr: float = attrs.field(default=DEFAULT_LR, validator=_positive_number)
    """Peak AdamW learning rate."""
    lr_schedule: str = attrs.field(default="constant", validator=_schedule)
    """After the warm-up: "constant", or "cosine" decay to 0 at the last step."""
    warmup_steps: int = attrs.field(default=DEFAULT_WARMUP_STEPS, validator=_int_at_least(0))
    """Steps of linear learning-rate warm-up from 0."""
    weight_decay: float = attrs.field(default=0.0, validator=_non_negative_number)
    """AdamW's decoupled weight decay."""
    max_length: int = attrs.field(default=DEFAULT_MAX_LENGTH, validator=_int_at_least(2))
    """Tokens per row (prompt + response + eos); longer responses are cut, rows whose prompt fills it dropped."""
    max_tokens_per_micro_batch: int = attrs.field(
        default=DEFAULT_MAX_TOKENS_PER_MICRO_BATCH, validator=_int_at_least(1)
    )
    """The token budget of one forward/backward pass (a row longer than it runs alone)."""
    packing: bool = attrs.field(default=False, validator=_bool)
    """Run each micro-batch as one packed row (no padding) instead of padded rows: saves compute when row
    lengths vary; the embedded rows are short and alike, and padded rows train them faster on a CPU."""
    seed: int = attrs.field(default=0, validator=_int_at_least(0))
    """Seeds the model initialisation, the row order and the embedded dataset."""
    eval_every: int = attrs.field(default=DEFAULT_EVAL_EVERY, validator=_int_at_least(0))
    """Score the validation rows (the held-out rows without any) every this many steps and at step 0;
    0 scores only the held-out rows after the last step."""
    validation_size: int = attrs.field(default=DEFAULT_VALIDATION_SIZE, validator=_int_at_least(0))
    """Training rows kept out of training (drawn with `seed`) and scored every `eval_every` steps to decide
    early stopping, so the held-out rows stay untouched until the end; 0 keeps every row for training."""
    stop_at_exact_match: float | None = attrs.field(default=DEFAULT_STOP_AT_EXACT_MATCH, validator=_optional_fraction)
    """Stop once a periodic evaluation reaches this exact match (a warm start with room left for RL); None
    always runs every step. Needs `eval_every` > 0."""
    eval_max_new_tokens: int = attrs.field(default=DEFAULT_EVAL_MAX_NEW_TOKENS, validator=_int_at_least(1))
    """Generation budget per held-out prompt."""
    output_dir: str = attrs.field(default=DEFAULT_OUTPUT_DIR, validator=_non_empty_str)
    """Run folder: `metrics.jsonl`, the exported model in `model/`, the embedded data in `data/`."""
    log_sinks: tuple[str, ...] = attrs.field(default=DEFAULT_LOG_SINKS, validator=_log_sinks)
    """Where the step and evaluation metrics go (rank 0), as RL's `trainer.log_sinks`: any of console, jsonl,
    tensorboard, wandb, mlflow."""

    def __attrs_post_init__(self) -> None:
        if self.stop_at_exact_match is not None and self.eval_every == 0:
            raise ConfigError(
                [
                    ConfigProblem(
                        "eval_every",
                        "an int > 0 when stop_at_exact_match is set",
                        "0",
                        "set eval_every, or stop_at_exact_match=null to run every step",
                    )
                ]
            )
        if self.steps is not None and self.epochs is not None:
            raise ConfigError(
                [
                    ConfigProblem(
                        "steps",
                        "at most one of steps and epochs",
                        f"steps={self.steps}, epochs={self.epochs}",
                        "remove one of them",
                    )
                ]
            )

    @property
    def uses_embedded_model(self) -> bool:
        """Whether the model is the embedded default's (not a folder)."""
        return self.model == EMBEDDED_MODEL

    def num_steps(self, num_rows: int) -> int:
        """Optimizer steps to run for `num_rows` training rows: `steps`, or `epochs` worth of batches."""
        if self.epochs is not None:
            return max(1, math.ceil(self.epochs * num_rows / self.batch_size))
        return self.steps if self.steps is not None else DEFAULT_STEPS
