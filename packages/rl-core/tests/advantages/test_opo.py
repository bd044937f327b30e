"""OPO: the length-weighted group baseline by hand, and its degenerate groups."""

from __future__ import annotations

import pytest
import torch

from rl_core.advantages import opo

from ._batches import DTYPE, batch


def test_opo_by_hand() -> None:
    # Group 0: lengths 1, 3 with scores 4, 0 -> baseline (1*4 + 3*0) / 4 = 1. Group 2 is a singleton: baseline 0.
    inputs = batch(
        [[4.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0]],
        [[1, 0, 0], [1, 1, 1], [1, 1, 0]],
        [0, 0, 2],
    )
    out = opo(inputs)
    expected = torch.tensor([[3.0, 0.0, 0.0], [-1.0, -1.0, -1.0], [2.0, 2.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(out.advantages, expected)
    assert torch.equal(out.advantages, out.returns)


def test_opo_group_of_empty_responses_is_finite_and_zero() -> None:
    out = opo(batch([[1.0, 1.0], [1.0, 1.0]], [[0, 0], [0, 0]], [3, 3]))
    assert torch.equal(out.advantages, torch.zeros(2, 2, dtype=DTYPE))


def test_opo_equal_lengths_reduce_to_the_group_mean() -> None:
    out = opo(batch([[0.0, 1.0], [0.0, 0.0], [0.0, 2.0]], [[1, 1], [1, 1], [1, 1]], [0, 0, 0]))
    assert out.advantages[:, 0].tolist() == pytest.approx([0.0, -1.0, 1.0])
