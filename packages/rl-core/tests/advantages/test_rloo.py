"""RLOO: hand-worked values and the leave-one-out formula written plainly."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from rl_core.advantages import AdvantageInputs, rloo

from ._batches import outcome_batch, random_batches


def test_rloo_by_hand() -> None:
    # Group 0: 1, 0, 2 -> baselines (0+2)/2 = 1, (1+2)/2 = 1.5, (1+0)/2 = 0.5. Group 3: 5, 1 -> each other's.
    # Group 9 is a singleton: baseline 0.
    out = rloo(outcome_batch([1.0, 5.0, 0.0, 2.0, 1.0, 7.0], [0, 3, 0, 0, 3, 9]))
    assert out.advantages[:, -1].tolist() == [0.0, 4.0, -1.5, 1.5, -4.0, 7.0]
    assert torch.equal(out.advantages, out.returns)


@settings(max_examples=80, deadline=None)
@given(random_batches())
def test_rloo_equals_reward_minus_mean_of_the_others(inputs: AdvantageInputs) -> None:
    out = rloo(inputs)
    ids = inputs.group_ids.tolist()
    size, length = inputs.mask.shape
    scores = [
        sum(inputs.token_level_rewards[b, t].item() for t in range(length) if inputs.mask[b, t]) for b in range(size)
    ]
    for b in range(size):
        others = [scores[j] for j in range(size) if ids[j] == ids[b] and j != b]
        baseline = sum(others) / len(others) if others else 0.0
        for t in range(length):
            expected = scores[b] - baseline if inputs.mask[b, t] else 0.0
            assert out.advantages[b, t].item() == pytest.approx(expected, abs=1e-9)
