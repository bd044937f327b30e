"""Whitening over masked tokens: hand-worked values, masking, and rejections."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core import ShapeError
from rl_core.advantages import whiten

# Masked values 1, 2, 3, 6: mean 3, deviations -2, -1, 0, 3 -> unbiased variance 14 / 3.
VALUES = torch.tensor([[1.0, 2.0, 100.0], [3.0, 6.0, -50.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 0], [1, 1, 0]])
SCALE = 1.0 / math.sqrt(14.0 / 3.0 + 1e-8)


def test_whiten_by_hand() -> None:
    expected = torch.tensor([[-2 * SCALE, -SCALE, 0.0], [0.0, 3 * SCALE, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(whiten(VALUES, MASK), expected)


def test_whiten_without_shifting_keeps_the_mean() -> None:
    expected = torch.tensor([[3 - 2 * SCALE, 3 - SCALE, 0.0], [3.0, 3 + 3 * SCALE, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(whiten(VALUES, MASK, shift_mean=False), expected)


def test_whiten_ignores_masked_values_even_nan() -> None:
    poisoned = VALUES.clone()
    poisoned[:, 2] = float("nan")
    assert torch.equal(whiten(poisoned, MASK.bool()), whiten(VALUES, MASK))


def test_whiten_of_a_constant_is_zero() -> None:
    assert whiten(torch.full((2, 2), 4.0), torch.ones(2, 2)).abs().max().item() == 0.0


def test_whiten_needs_two_tokens() -> None:
    with pytest.raises(ValueError, match=r"whiten needs at least 2 masked tokens .* got 1"):
        whiten(VALUES, torch.tensor([[1, 0, 0], [0, 0, 0]]))


@pytest.mark.parametrize(
    ("values", "mask", "message"),
    [
        (VALUES[0], MASK, r"values must have shape \(B, T\)"),
        (VALUES.long(), MASK, "values must have a floating dtype"),
        (VALUES, MASK[:, :2], r"mask must have shape \(B, T\) with T=3"),
        (VALUES, MASK * 3, "mask must hold only 0/1"),
    ],
)
def test_whiten_rejects_bad_arguments(values: torch.Tensor, mask: torch.Tensor, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        whiten(values, mask)
