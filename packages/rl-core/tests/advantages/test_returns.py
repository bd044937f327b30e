"""Discounted reward-to-go that skips masked tokens."""

from __future__ import annotations

import torch

from rl_core.advantages._returns import discounted_returns


def test_discounted_returns_by_hand_skip_masked_tokens() -> None:
    # Row 0: response tokens at 0, 1, 3 (2 is an observation, 4 padding); rewards 1, 0, 4 there.
    rewards = torch.tensor([[1.0, 0.0, 9.0, 4.0, 9.0], [0.0, 2.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False, True, False], [True, True, False, False, False]])
    returns = discounted_returns(rewards, mask, 0.5)
    # Row 0: G3 = 4, G1 = 0 + 0.5 * 4 = 2 (one discount across the observation), G0 = 1 + 0.5 * 2 = 2.
    # Row 1: G1 = 2, G0 = 0 + 0.5 * 2 = 1.
    expected = torch.tensor([[2.0, 2.0, 0.0, 4.0, 0.0], [1.0, 2.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(returns, expected)


def test_undiscounted_returns_are_reverse_cumulative_sums() -> None:
    rewards = torch.tensor([[1.0, 2.0, 3.0]])
    assert discounted_returns(rewards, torch.ones(1, 3, dtype=torch.bool), 1.0).tolist() == [[6.0, 5.0, 3.0]]
