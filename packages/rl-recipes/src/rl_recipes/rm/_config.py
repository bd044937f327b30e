"""`RMConfig`: the frozen, validated settings of `rl-recipes rm` (a Bradley-Terry reward model)."""

from __future__ import annotations

import math
from typing import Any

import attrs

from rl_runtime.config import ConfigError, ConfigProblem

EMBEDDED_MODEL = "embedded"
"""`RMConfig.model` value that builds the embedded tiny Llama (as a one-label classifier) instead of a folder."""
DEFAULT_OUTPUT_DIR = "runs/rm"
DEFAULT_STEPS = 60
DEFAULT_BATCH_SIZE = 16
DEFAULT_LR = 2e-3
DEFAULT_PAIRS = 1000
DEFAULT_HELDOUT_PAIRS = 200
DEFAULT_MAX_LENGTH = 64


def _problem(name: str, expected: str, value: object, fix: str = "") -> ConfigError:
    return ConfigError([ConfigProblem(name, expected, f"{value!r} ({type(value).__name__})", fix)])


def _int_at_least(minimum: int) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _problem(attribute.name, f"an int >= {minimum}", value)

    return check


def _optional_int_at_least(minimum: int) -> Any:
    check = _int_at_least(minimum)

    def optional(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(instance, attribute, value)

    return optional


def _positive_number(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise _problem(attribute.name, "a finite number > 0", value)


def _non_empty_str(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise _problem(attribute.name, "a non-empty string", value)


def _optional_non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _non_empty_str(instance, attribute, value)


@attrs.frozen
class RMConfig:
    """A reward model trained by Bradley-Terry (`-log sigmoid(r_chosen - r_rejected)`) on preference pairs.

    The defaults train on pairs generated from the embedded arithmetic task (the correct answer preferred over a
    wrong one) with the embedded tiny Llama as a one-label classifier, and write a Hugging Face folder that a run
    config's `reward_model.path` loads.
    """

    train_file: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """A jsonl of pairs (`prompt`, `chosen`, `rejected`: the question and two responses); None generates pairs
    from the embedded arithmetic task into `output_dir/data`."""
    heldout_file: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """Pairs scored for the held-out pairwise accuracy; None: the generated held-out pairs, or the last
    `heldout_pairs` rows of `train_file` (kept out of training)."""
    model: str = attrs.field(default=EMBEDDED_MODEL, validator=_non_empty_str)
    """"embedded" (the tiny Llama built in code, fresh weights) or a local Hugging Face folder (a causal LM such as
    the SFT warm start: its body is kept and a fresh one-label head added)."""
    tokenizer: str | None = attrs.field(default=None, validator=_optional_non_empty_str)
    """A tokenizer folder; None: the embedded tokenizer (embedded model) or the model folder's."""
    steps: int = attrs.field(default=DEFAULT_STEPS, validator=_int_at_least(1))
    """Optimizer steps."""
    batch_size: int = attrs.field(default=DEFAULT_BATCH_SIZE, validator=_int_at_least(1))
    """Pairs per step."""
    lr: float = attrs.field(default=DEFAULT_LR, validator=_positive_number)
    """AdamW learning rate (constant)."""
    max_length: int = attrs.field(default=DEFAULT_MAX_LENGTH, validator=_int_at_least(2))
    """Tokens per sequence (prompt + response + eos); longer ones keep their last `max_length` tokens."""
    pairs: int = attrs.field(default=DEFAULT_PAIRS, validator=_int_at_least(1))
    """Generated training pairs (without `train_file`)."""
    heldout_pairs: int = attrs.field(default=DEFAULT_HELDOUT_PAIRS, validator=_int_at_least(1))
    """Generated held-out pairs (without `train_file`), or rows of `train_file` kept out (without `heldout_file`)."""
    threads: int | None = attrs.field(default=1, validator=_optional_int_at_least(1))
    """CPU threads torch uses while training (restored afterwards); null keeps torch's default. 1 by default: the
    tiny model's matrices gain nothing from more, and on a busy 2-core machine torch's default threads made the
    embedded default train in 294 s instead of 7 s."""
    seed: int = attrs.field(default=0, validator=_int_at_least(0))
    """Seeds the model initialisation, the generated pairs and the batch order."""
    output_dir: str = attrs.field(default=DEFAULT_OUTPUT_DIR, validator=_non_empty_str)
    """Run folder: `model/` (the reward model), `summary.json`, `metrics.jsonl`, generated pairs in `data/`."""
