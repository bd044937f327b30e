"""ReMax: hand-worked values and the missing-baseline rejection."""

from __future__ import annotations

import pytest
import torch

from rl_core.advantages import remax

from ._batches import DTYPE, batch


def test_remax_by_hand() -> None:
    inputs = batch(
        [[1.0, 0.0, 2.0, 5.0], [0.0, 3.0, 0.0, 0.0]],
        [[1, 0, 1, 0], [1, 1, 0, 0]],
        [0, 0],
        baseline_rewards=[1.5, 4.0],
    )
    out = remax(inputs)
    # Reward-to-go over response tokens: row 0: 3, -, 2 (the 5 is padding); row 1: 3, 3.
    torch.testing.assert_close(out.returns, torch.tensor([[3.0, 0.0, 2.0, 0.0], [3.0, 3.0, 0.0, 0.0]], dtype=DTYPE))
    expected = torch.tensor([[1.5, 0.0, 0.5, 0.0], [-1.0, -1.0, 0.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(out.advantages, expected)


def test_remax_needs_baseline_rewards() -> None:
    with pytest.raises(ValueError, match="advantage estimator 'remax' needs baseline_rewards"):
        remax(batch([[1.0]], [[1]], [0]))
