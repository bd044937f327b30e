"""REINFORCE++ and REINFORCE++-baseline: hand-worked values, a plain-loop reference and rejections."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rl_core.advantages import AdvantageInputs, reinforce_plus_plus, reinforce_plus_plus_baseline

from ._batches import DTYPE, batch, random_batches

WHITEN_EPS = 1e-8


def test_reinforce_plus_plus_by_hand() -> None:
    inputs = batch([[0.0, 1.0], [2.0, 7.0]], [[1, 1], [1, 0]], [0, 1])
    out = reinforce_plus_plus(inputs, gamma=0.5)
    # Returns: row 0: G1 = 1, G0 = 0.5 * 1; row 1: G0 = 2 (the 7 is padding).
    torch.testing.assert_close(out.returns, torch.tensor([[0.5, 1.0], [2.0, 0.0]], dtype=DTYPE))
    # Whitening 0.5, 1, 2: mean 7/6, deviations -2/3, -1/6, 5/6, unbiased variance (42/36) / 2 = 7/12.
    s = 1 / math.sqrt(7 / 12 + WHITEN_EPS)
    torch.testing.assert_close(out.advantages, torch.tensor([[-2 / 3 * s, -1 / 6 * s], [5 / 6 * s, 0.0]], dtype=DTYPE))


def test_reinforce_plus_plus_baseline_by_hand() -> None:
    inputs = batch([[0.0, 1.0, 9.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]], [[1, 1, 0], [1, 0, 0], [0, 1, 0]], [0, 0, 1])
    out = reinforce_plus_plus_baseline(inputs)
    # Scores 1, 3 (group 0, mean 2) and 2 (singleton, baseline 0): token values -1, -1, 1, 2.
    # Whitening: mean 0.25, deviations -1.25, -1.25, 0.75, 1.75, unbiased variance 6.75 / 3 = 2.25.
    s = 1 / math.sqrt(2.25 + WHITEN_EPS)
    expected = torch.tensor([[-1.25 * s, -1.25 * s, 0.0], [0.75 * s, 0.0, 0.0], [0.0, 1.75 * s, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(out.advantages, expected)
    assert torch.equal(out.advantages, out.returns)


def _plain_whiten(tokens: dict[tuple[int, int], float]) -> dict[tuple[int, int], float]:
    mean = sum(tokens.values()) / len(tokens)
    variance = sum((v - mean) ** 2 for v in tokens.values()) / (len(tokens) - 1)
    return {key: (v - mean) / math.sqrt(variance + WHITEN_EPS) for key, v in tokens.items()}


@settings(max_examples=60, deadline=None)
@given(random_batches(), st.floats(0.0, 1.0))
def test_reinforce_plus_plus_matches_a_plain_loop(inputs: AdvantageInputs, gamma: float) -> None:
    assume(int(inputs.mask.sum()) >= 2)
    size, length = inputs.mask.shape
    returns: dict[tuple[int, int], float] = {}
    for b in range(size):
        running = 0.0
        for t in reversed([t for t in range(length) if inputs.mask[b, t]]):
            running = inputs.token_level_rewards[b, t].item() + gamma * running
            returns[b, t] = running
    whitened = _plain_whiten(returns)
    out = reinforce_plus_plus(inputs, gamma=gamma)
    expected_ret = [[returns.get((b, t), 0.0) for t in range(length)] for b in range(size)]
    expected_adv = [[whitened.get((b, t), 0.0) for t in range(length)] for b in range(size)]
    torch.testing.assert_close(out.returns, torch.tensor(expected_ret, dtype=DTYPE))
    torch.testing.assert_close(out.advantages, torch.tensor(expected_adv, dtype=DTYPE), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("gamma", [-0.5, 1.01])
def test_reinforce_plus_plus_rejects_gamma_out_of_range(gamma: float) -> None:
    with pytest.raises(ValueError, match=rf"gamma must be in \[0, 1\], got {gamma}"):
        reinforce_plus_plus(batch([[1.0, 0.0]], [[1, 1]], [0]), gamma=gamma)


@pytest.mark.parametrize("estimator", [reinforce_plus_plus, reinforce_plus_plus_baseline])
def test_whitened_estimators_need_two_response_tokens(estimator: object) -> None:
    with pytest.raises(ValueError, match="whiten needs at least 2 masked tokens"):
        estimator(batch([[1.0, 0.0], [1.0, 1.0]], [[1, 0], [0, 0]], [0, 0]))  # type: ignore[operator]
