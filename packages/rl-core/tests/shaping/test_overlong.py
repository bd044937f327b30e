"""DAPO's soft overlong punishment at and around the ramp's boundaries."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.shaping import overlong_penalty


def test_overlong_penalty_at_the_boundaries_by_hand() -> None:
    # max 10, buffer 4: the ramp starts after 6 tokens and loses 1/4 per token.
    lengths = torch.tensor([0, 6, 7, 8, 10, 15])
    penalty = overlong_penalty(lengths, max_response_length=10, buffer_length=4)
    assert penalty.tolist() == [0.0, 0.0, -0.25, -0.5, -1.0, -1.0]
    assert penalty.dtype == torch.get_default_dtype()


def test_overlong_penalty_scales_with_the_factor() -> None:
    penalty = overlong_penalty(
        torch.tensor([6, 7, 10, 15]), max_response_length=10, buffer_length=4, penalty_factor=0.5
    )
    assert penalty.tolist() == [0.0, -0.125, -0.5, -0.5]


def test_a_buffer_as_long_as_the_budget_ramps_from_zero() -> None:
    penalty = overlong_penalty(torch.tensor([0, 1, 2]), max_response_length=2, buffer_length=2)
    assert penalty.tolist() == [0.0, -0.5, -1.0]


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 64).flatmap(lambda m: st.tuples(st.just(m), st.integers(1, m))),
    st.floats(0.0, 4.0),
    st.lists(st.integers(0, 80), min_size=1, max_size=10),
)
def test_overlong_penalty_matches_verls_formula(budget: tuple[int, int], factor: float, lengths: list[int]) -> None:
    max_len, buffer = budget
    got = overlong_penalty(
        torch.tensor(lengths), max_response_length=max_len, buffer_length=buffer, penalty_factor=factor
    )
    for length, value in zip(lengths, got.tolist(), strict=True):
        # verl's DAPO reward manager: min(-exceed / buffer * factor, 0). verl never sees a length beyond the
        # budget; we hold the penalty at -factor there instead of extrapolating.
        exceed = min(length, max_len) - (max_len - buffer)
        expected = min(-exceed / buffer * factor, 0.0)
        assert value == pytest.approx(expected, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize(
    ("lengths", "kwargs", "match"),
    [
        (
            torch.tensor([1]),
            {"max_response_length": 4, "buffer_length": 5},
            r"buffer_length \(5\) must be <= max_response_length \(4\)",
        ),
        (torch.tensor([1]), {"max_response_length": 4, "buffer_length": 0}, "buffer_length must be > 0"),
        (torch.tensor([1]), {"max_response_length": 0, "buffer_length": 1}, "max_response_length must be > 0"),
        (
            torch.tensor([1]),
            {"max_response_length": 4, "buffer_length": 2, "penalty_factor": -1.0},
            "penalty_factor must be >= 0",
        ),
        (torch.tensor([-1, 2]), {"max_response_length": 4, "buffer_length": 2}, "response_lengths must be >= 0"),
        (torch.tensor([True]), {"max_response_length": 4, "buffer_length": 2}, "response_lengths must be integer"),
        (torch.tensor([1.0]), {"max_response_length": 4, "buffer_length": 2}, "response_lengths must have an integer"),
        (
            torch.tensor([[1]]),
            {"max_response_length": 4, "buffer_length": 2},
            r"response_lengths must have shape \(None\)",
        ),
    ],
)
def test_overlong_penalty_rejects(lengths: torch.Tensor, kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        overlong_penalty(lengths, **kwargs)
