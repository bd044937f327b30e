"""Pass@k GRPO: only each group's strict best gets an advantage; hand-worked values, a loop reference, rejections."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
from hypothesis import given, settings

from rl_core.advantages import AdvantageInputs, grpo_passk

from ._batches import outcome_batch, per_sequence, random_batches

EPS = 1e-6

# Group 0: 3, 1, 2 (best 3, runner-up 2, std 1); group 1: 5, 5, 0 (tied best); group 2: -1, -3 (std sqrt 2).
SCORES = [3.0, 5.0, 1.0, -1.0, 5.0, 2.0, 0.0, -3.0]
IDS = [0, 1, 0, 2, 1, 0, 1, 2]


def test_passk_by_hand() -> None:
    out = grpo_passk(outcome_batch(SCORES, IDS))
    expected = [1 / (1 + EPS), 0.0, 0.0, 2 / (math.sqrt(2) + EPS), 0.0, 0.0, 0.0, 0.0]
    assert per_sequence(out.advantages) == pytest.approx(expected, abs=1e-12)
    assert torch.equal(out.advantages, out.returns)


def test_passk_without_std_is_the_margin() -> None:
    out = grpo_passk(outcome_batch(SCORES, IDS), norm_by_std=False)
    assert per_sequence(out.advantages) == [1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(random_batches(min_group_size=2, full_mask=True, discrete_rewards=True))
def test_passk_matches_a_plain_loop(inputs: AdvantageInputs) -> None:
    scores = inputs.token_level_rewards.sum(dim=-1).tolist()
    ids = inputs.group_ids.tolist()
    expected = [0.0] * len(scores)
    for group in set(ids):
        members = [i for i in range(len(scores)) if ids[i] == group]
        ranked = sorted((scores[i] for i in members), reverse=True)
        if ranked[0] == ranked[1]:
            continue
        best = next(i for i in members if scores[i] == ranked[0])
        expected[best] = (ranked[0] - ranked[1]) / (statistics.stdev(ranked) + EPS)
    assert per_sequence(grpo_passk(inputs).advantages) == pytest.approx(expected, abs=1e-9)


def test_passk_rejects_a_singleton_group() -> None:
    with pytest.raises(ValueError, match=r"grpo_passk needs at least 2 samples per group, .* group of 1"):
        grpo_passk(outcome_batch([1.0, 0.0, 1.0], [0, 0, 1]))


def test_passk_rejects_non_positive_epsilon() -> None:
    with pytest.raises(ValueError, match=r"epsilon must be > 0, got -1\.0"):
        grpo_passk(outcome_batch([1.0, 0.0], [0, 0]), epsilon=-1.0)
