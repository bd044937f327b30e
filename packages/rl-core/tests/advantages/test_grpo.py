"""GRPO and Dr. GRPO: hand-worked values, zero mean per group, rejections."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings

from rl_core.advantages import AdvantageInputs, grpo

from ._batches import DTYPE, batch, outcome_batch, per_sequence, random_batches

EPS = 1e-6


def test_grpo_by_hand() -> None:
    # Group 0: scores 1, 0, 0 -> mean 1/3, unbiased std sqrt(1/3). Group 5: 2, 4 -> mean 3, std sqrt(2).
    # Group 8 is a singleton: mean 0, std 1.
    out = grpo(outcome_batch([1.0, 0.0, 2.0, 0.0, 4.0, 3.0], [0, 0, 5, 0, 5, 8]))
    third = math.sqrt(1 / 3) + EPS
    expected = [
        (2 / 3) / third,
        (-1 / 3) / third,
        -1 / (math.sqrt(2) + EPS),
        (-1 / 3) / third,
        1 / (math.sqrt(2) + EPS),
    ]
    expected.append(3.0 / (1.0 + EPS))
    assert per_sequence(out.advantages) == pytest.approx(expected, abs=1e-12)
    assert torch.equal(out.advantages, out.returns)


def test_dr_grpo_only_centres() -> None:
    out = grpo(outcome_batch([1.0, 0.0, 2.0, 0.0, 4.0, 3.0], [0, 0, 5, 0, 5, 8]), norm_by_std=False)
    assert per_sequence(out.advantages) == pytest.approx([2 / 3, -1 / 3, -1.0, -1 / 3, 1.0, 3.0], abs=1e-12)


def test_grpo_group_of_equal_rewards_gets_zero() -> None:
    out = grpo(outcome_batch([1.0, 1.0, 1.0], [4, 4, 4]))
    assert per_sequence(out.advantages) == [0.0, 0.0, 0.0]


def test_grpo_scores_sum_masked_token_rewards_only() -> None:
    # Row 0 sums to 1 + 2 = 3 (the 50 is padding); row 1 sums to 1.
    inputs = batch([[1.0, 2.0, 50.0], [1.0, 0.0, 0.0]], [[1, 1, 0], [1, 1, 1]], [0, 0])
    out = grpo(inputs, norm_by_std=False)
    expected = torch.tensor([[1.0, 1.0, 0.0], [-1.0, -1.0, -1.0]], dtype=DTYPE)
    assert torch.equal(out.advantages, expected)


@settings(max_examples=80, deadline=None)
@given(random_batches(min_group_size=2, full_mask=True))
def test_grpo_advantages_have_zero_mean_per_group(inputs: AdvantageInputs) -> None:
    for norm_by_std in (True, False):
        advantages = per_sequence(grpo(inputs, norm_by_std=norm_by_std).advantages)
        for group in set(inputs.group_ids.tolist()):
            members = [a for a, g in zip(advantages, inputs.group_ids.tolist(), strict=True) if g == group]
            assert sum(members) / len(members) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("epsilon", [0.0, -1e-6])
def test_grpo_rejects_non_positive_epsilon(epsilon: float) -> None:
    with pytest.raises(ValueError, match=f"epsilon must be > 0, got {epsilon}"):
        grpo(outcome_batch([1.0, 0.0], [0, 0]), epsilon=epsilon)
