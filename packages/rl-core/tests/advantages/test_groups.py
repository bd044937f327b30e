"""Per-group statistics, masked outcome scores and the token broadcast."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core._groups import group_index
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores


def test_group_stats_by_hand() -> None:
    # Groups: id 9 -> [1, 2, 6]; id 2 -> [4]; id 5 -> [3, 3].
    scores = torch.tensor([1.0, 4.0, 2.0, 3.0, 6.0, 3.0], dtype=torch.float64)
    ids = torch.tensor([9, 2, 9, 5, 9, 5])
    stats = group_stats(scores, ids)
    # Groups are numbered by sorted id: 2 -> 0, 5 -> 1, 9 -> 2.
    assert stats.index.tolist() == [2, 0, 2, 1, 2, 1]
    assert stats.count.tolist() == [1.0, 2.0, 3.0]
    assert stats.total.tolist() == [4.0, 6.0, 9.0]
    # The singleton group gets mean 0 and std 1.
    assert stats.mean.tolist() == [0.0, 3.0, 3.0]
    # id 9: deviations -2, -1, 3 -> (4 + 1 + 9) / 2 = 7.
    torch.testing.assert_close(stats.std, torch.tensor([1.0, 0.0, math.sqrt(7.0)], dtype=torch.float64))


def test_group_index_counts_distinct_ids() -> None:
    index, num_groups = group_index(torch.tensor([40, -3, 40, 7]))
    assert index.tolist() == [2, 0, 2, 1]
    assert num_groups == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-10, 10)), min_size=1, max_size=12))
def test_group_stats_match_a_plain_loop(pairs: list[tuple[int, float]]) -> None:
    ids = torch.tensor([group for group, _ in pairs])
    scores = torch.tensor([score for _, score in pairs], dtype=torch.float64)
    stats = group_stats(scores, ids)
    for i, (group, _) in enumerate(pairs):
        members = [score for other, score in pairs if other == group]
        g = int(stats.index[i])
        if len(members) == 1:
            assert (stats.mean[g].item(), stats.std[g].item()) == (0.0, 1.0)
            continue
        mean = sum(members) / len(members)
        std = math.sqrt(sum((m - mean) ** 2 for m in members) / (len(members) - 1))
        assert math.isclose(stats.mean[g].item(), mean, rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(stats.std[g].item(), std, rel_tol=1e-9, abs_tol=1e-9)


def test_outcome_scores_ignore_masked_rewards_even_nan() -> None:
    rewards = torch.tensor([[1.0, 2.0, float("nan")], [float("inf"), 0.5, 0.25]])
    mask = torch.tensor([[True, True, False], [False, True, True]])
    assert outcome_scores(rewards, mask).tolist() == [3.0, 0.75]


def test_broadcast_to_tokens_fills_the_mask_only() -> None:
    mask = torch.tensor([[True, False, True], [False, False, False]])
    assert broadcast_to_tokens(torch.tensor([2.0, 5.0]), mask).tolist() == [[2.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
