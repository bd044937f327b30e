"""GAE: hand-worked values, a plain-loop reference, the gamma = lambda = 1 identity and rejections."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.advantages import AdvantageInputs, gae

from ._batches import DTYPE, batch, random_batches


def test_gae_by_hand() -> None:
    inputs = batch(
        rewards=[[0.0, 0.0, 8.0], [0.0, 100.0, 8.0], [0.0, 3.0, 7.0]],
        mask=[[1, 1, 1], [1, 0, 1], [1, 1, 0]],
        group_ids=[0, 1, 2],
        values=[[1.0, 2.0, 4.0], [1.0, 50.0, 4.0], [1.0, 2.0, 9.0]],
    )
    out = gae(inputs, gamma=0.5, lam=0.5)
    # Row 0: deltas 0, 0, 4 -> A2 = 4, A1 = 0 + 0.25 * 4 = 1, A0 = 0 + 0.25 * 1 = 0.25.
    # Row 1: token 1 is an observation: A2 = 4, delta0 = 0 + 0.5 * V2 - V0 = 1, A0 = 1 + 0.25 * 4 = 2.
    # Row 2: token 2 is padding: A1 = 3 - 2 = 1, delta0 = 0.5 * 2 - 1 = 0, A0 = 0.25.
    expected_adv = torch.tensor([[0.25, 1.0, 4.0], [2.0, 0.0, 4.0], [0.25, 1.0, 0.0]], dtype=DTYPE)
    expected_ret = torch.tensor([[1.25, 3.0, 8.0], [3.0, 0.0, 8.0], [1.25, 3.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(out.advantages, expected_adv)
    torch.testing.assert_close(out.returns, expected_ret)


def _reference_gae(inputs: AdvantageInputs, gamma: float, lam: float) -> tuple[list[list[float]], list[list[float]]]:
    """GAE on each row's response tokens only, written with plain loops."""
    assert inputs.values is not None
    size, length = inputs.mask.shape
    advantages = [[0.0] * length for _ in range(size)]
    returns = [[0.0] * length for _ in range(size)]
    for b in range(size):
        steps = [t for t in range(length) if inputs.mask[b, t]]
        running, next_value = 0.0, 0.0
        for t in reversed(steps):
            reward, value = inputs.token_level_rewards[b, t].item(), inputs.values[b, t].item()
            running = reward + gamma * next_value - value + gamma * lam * running
            next_value = value
            advantages[b][t] = running
            returns[b][t] = running + value
    return advantages, returns


@settings(max_examples=60, deadline=None)
@given(random_batches(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_gae_matches_a_plain_loop(inputs: AdvantageInputs, gamma: float, lam: float) -> None:
    out = gae(inputs, gamma=gamma, lam=lam)
    advantages, returns = _reference_gae(inputs, gamma, lam)
    torch.testing.assert_close(out.advantages, torch.tensor(advantages, dtype=DTYPE))
    torch.testing.assert_close(out.returns, torch.tensor(returns, dtype=DTYPE))


@settings(max_examples=60, deadline=None)
@given(random_batches())
def test_gae_with_unit_gamma_and_lambda_is_reward_to_go_minus_values(inputs: AdvantageInputs) -> None:
    assert inputs.values is not None
    out = gae(inputs, gamma=1.0, lam=1.0)
    size, length = inputs.mask.shape
    for b in range(size):
        for t in range(length):
            if not inputs.mask[b, t]:
                assert out.advantages[b, t].item() == 0.0
                assert out.returns[b, t].item() == 0.0
                continue
            reward_to_go = sum(inputs.token_level_rewards[b, s].item() for s in range(t, length) if inputs.mask[b, s])
            assert out.returns[b, t].item() == pytest.approx(reward_to_go, abs=1e-9)
            assert out.advantages[b, t].item() == pytest.approx(reward_to_go - inputs.values[b, t].item(), abs=1e-9)


def test_gae_output_carries_no_gradient() -> None:
    values = torch.zeros(1, 2, requires_grad=True)
    inputs = AdvantageInputs(torch.ones(1, 2), torch.ones(1, 2), torch.tensor([0]), values=values)
    out = gae(inputs)
    assert not out.advantages.requires_grad
    assert not out.returns.requires_grad


def test_gae_needs_values() -> None:
    with pytest.raises(ValueError, match="advantage estimator 'gae' needs values"):
        gae(batch([[1.0]], [[1]], [0]))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"gamma": -0.1}, r"gamma must be in \[0, 1\], got -0.1"),
        ({"gamma": 1.5}, r"gamma must be in \[0, 1\], got 1.5"),
        ({"lam": -1.0}, r"lam must be in \[0, 1\], got -1.0"),
        ({"lam": 2.0}, r"lam must be in \[0, 1\], got 2.0"),
    ],
)
def test_gae_rejects_out_of_range_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gae(batch([[1.0]], [[1]], [0], values=[[0.0]]), **params)
