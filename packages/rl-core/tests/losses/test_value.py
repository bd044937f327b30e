"""The clipped value loss by hand, its gradient, masking and rejections."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core import ShapeError
from rl_core.losses import LossNormalizer, clipped_value_loss

from ._batches import assert_close, tensor


def test_by_hand() -> None:
    # Token 0: v = old, both errors 1 -> 0.5. Token 1: v = 2, clip to 1.5: max(4, 2.25) -> 2.
    # Token 2: v = 3, clip to 1.5, target 5: max(4, 12.25) -> 6.125 (the clipped error is larger).
    values = tensor([[1.0, 2.0, 3.0]]).requires_grad_(True)
    out = clipped_value_loss(
        values, tensor([[1.0, 1.0, 1.0]]), tensor([[0.0, 0.0, 5.0]]), torch.ones(1, 3), clip_range=0.5
    )
    assert out.loss.item() == pytest.approx((0.5 + 2.0 + 6.125) / 3)
    assert out.clipfrac.item() == pytest.approx(1 / 3)
    out.loss.backward()
    # d 0.5 (v - R)^2 / dv = v - R where the unclipped error wins; 0 where the clipped one does.
    assert_close(values.grad, [[1.0 / 3, 2.0 / 3, 0.0]])


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [("token-mean", (0.5 + 2.0 + 8.0) / 3), ("seq-mean-token-mean", ((0.5 + 2.0) / 2 + 8.0) / 2)],
)
def test_aggregation_and_masking(aggregation: str, expected: float) -> None:
    values = tensor([[1.0, 2.0, math.nan], [4.0, 0.0, 0.0]]).requires_grad_(True)
    old = tensor([[1.0, 1.0, math.inf], [4.0, 0.0, 0.0]])
    returns = tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    out = clipped_value_loss(values, old, returns, mask, clip_range=2.0, aggregation=aggregation)
    assert out.loss.item() == pytest.approx(expected)
    assert out.clipfrac.item() == 0.0
    out.loss.backward()
    assert values.grad is not None
    assert values.grad[0, 2].item() == 0.0


def test_infinite_clip_range_is_plain_regression_and_normaliser_is_used() -> None:
    values, old, returns = tensor([[3.0, -1.0]]), tensor([[0.0, 0.0]]), tensor([[1.0, 1.0]])
    out = clipped_value_loss(
        values, old, returns, torch.ones(1, 2), clip_range=math.inf, normalizer=LossNormalizer(8.0, 2.0, 2.0)
    )
    assert out.loss.item() == pytest.approx(0.5 * (4.0 + 4.0) / 8)


def test_rejections() -> None:
    good = tensor([[0.0, 0.0]])
    with pytest.raises(ValueError, match=r"clip_range must be > 0, got 0.0"):
        clipped_value_loss(good, good, good, torch.ones(1, 2), clip_range=0.0)
    with pytest.raises(ValueError, match=r"clip_range must be > 0, got nan"):
        clipped_value_loss(good, good, good, torch.ones(1, 2), clip_range=math.nan)
    with pytest.raises(ShapeError, match=r"returns must have shape \(B, T\) with T=2"):
        clipped_value_loss(good, good, tensor([[0.0]]), torch.ones(1, 2), clip_range=0.2)
    with pytest.raises(ShapeError, match="old_values must have a floating dtype"):
        clipped_value_loss(good, torch.zeros(1, 2, dtype=torch.int64), good, torch.ones(1, 2), clip_range=0.2)
