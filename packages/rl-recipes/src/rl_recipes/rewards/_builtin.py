"""The built-in rule rewards: GSM8K exact match, the `#### N` format reward, and math-verify equivalence."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rl_recipes.rewards._extract import extract_answer, has_answer_format, numbers_match
from rl_recipes.rewards._registry import register_reward

MATH_VERIFY_EXTRA = "math"
"""The rl-recipes optional extra that installs `math-verify`."""


@register_reward("gsm8k_exact_match")
def gsm8k_exact_match(response_text: str, ground_truth: str, **extra: Any) -> float:
    """1.0 when the response's final number equals the ground truth's (see `numbers_match`), else 0.0.

    `ground_truth` may be the bare answer (`"72"`) or a full GSM8K answer text ending `#### 72`.
    A response with no number scores 0.0; a ground truth with no number raises `ValueError`.
    """
    reference = extract_answer(ground_truth)
    if reference is None:
        raise ValueError(f"ground truth {ground_truth!r} holds no number; expected e.g. '72' or '... #### 72'")
    predicted = extract_answer(response_text)
    return float(predicted is not None and numbers_match(predicted, reference))


@register_reward("format")
def format_reward(response_text: str, ground_truth: str, **extra: Any) -> float:
    """1.0 when the response contains an answer in the `#### N` format, else 0.0."""
    return float(has_answer_format(response_text))


def require_math_verify() -> Any:
    """Import and return the optional `math_verify` module; raise ImportError naming the extra if absent."""
    try:
        return importlib.import_module("math_verify")
    except ImportError as exc:
        raise ImportError(
            "the 'math_verify' reward needs the optional package math-verify; "
            f"install it with `pip install 'rl-recipes[{MATH_VERIFY_EXTRA}]'`"
        ) from exc


@register_reward("math_verify")
def math_verify_reward(response_text: str, ground_truth: str, **extra: Any) -> float:
    """1.0 when math-verify judges the response's answer equivalent to the ground truth, else 0.0.

    Needs the optional `math-verify` package. Its own signal-based timeouts are switched off (they only
    work in the main thread); `RewardRunner` bounds the time per sample instead.
    """
    math_verify = require_math_verify()
    gold = math_verify.parse(ground_truth, parsing_timeout=None)
    answer = math_verify.parse(response_text, parsing_timeout=None)
    return float(math_verify.verify(gold, answer, timeout_seconds=None))


AVAILABILITY_CHECKS: dict[str, Callable[[], object]] = {"math_verify": require_math_verify}
"""Checks run when a registered reward is loaded, so a missing optional package fails before training."""
