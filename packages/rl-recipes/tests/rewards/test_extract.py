"""Answer extraction, normalisation and the built-in rule rewards on hand-written cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_recipes.rewards import (
    REWARD_FUNCTIONS,
    extract_answer,
    format_reward,
    gsm8k_exact_match,
    has_answer_format,
    normalize_number,
    numbers_match,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
        ("#### 1,234", "1234"),
        ("The total is 1,234,567 dollars", "1234567"),
        ("#### +12.0", "12"),
        ("#### 3.50", "3.5"),
        ("It drops to -7 degrees", "-7"),
        ("#### -0.0", "0"),
        ("5-3 leaves 2", "2"),  # a minus glued to a digit is subtraction, not a sign
        ("first 3 then 4", "4"),  # no marker: the last number
        ("a #### 3 #### 4", "4"),  # several markers: the last one wins
        ("#### 10 apples, or 11", "10"),  # first number after the marker
        ("#### none; maybe 42", "42"),
        ("about .5 of it", "0.5"),
        ("the answer is 81.", "81"),
        ("no number at all", None),
        ("####", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(("raw", "expected"), [("1,000", "1000"), ("+5", "5"), ("2.000", "2"), ("-.25", "-0.25")])
def test_normalize_number(raw: str, expected: str) -> None:
    assert normalize_number(raw) == expected


def test_numbers_match_tolerance() -> None:
    assert numbers_match("0.30000000000000004", "0.3")
    assert numbers_match("72", "72.0000001")
    assert not numbers_match("72", "72.01")
    assert not numbers_match("-72", "72")


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_comma_grouped_integers_round_trip(value: int) -> None:
    assert extract_answer(f"so #### {value:,}") == str(value)


@pytest.mark.parametrize(
    ("response", "truth", "score"),
    [
        ("23 + 58 = 81 #### 81", "81", 1.0),
        ("#### 81.0", "The sum is 81.\n#### 81", 1.0),
        ("I think it's 1,234", "1234", 1.0),
        ("#### 80", "81", 0.0),
        ("no idea", "81", 0.0),
        ("#### -5", "5", 0.0),
    ],
)
def test_gsm8k_exact_match(response: str, truth: str, score: float) -> None:
    assert gsm8k_exact_match(response, truth) == score


def test_gsm8k_exact_match_rejects_ground_truth_without_number() -> None:
    with pytest.raises(ValueError, match="ground truth 'n/a' holds no number"):
        gsm8k_exact_match("#### 1", "n/a")


@pytest.mark.parametrize(
    ("response", "score"), [("so #### 81", 1.0), ("####-3", 1.0), ("#### 1,5", 1.0), ("81", 0.0), ("#### x", 0.0)]
)
def test_format_reward(response: str, score: float) -> None:
    assert format_reward(response, "81") == score
    assert has_answer_format(response) is bool(score)


def test_builtins_are_registered() -> None:
    assert REWARD_FUNCTIONS["gsm8k_exact_match"] is gsm8k_exact_match
    assert REWARD_FUNCTIONS["format"] is format_reward
    assert "math_verify" in REWARD_FUNCTIONS
