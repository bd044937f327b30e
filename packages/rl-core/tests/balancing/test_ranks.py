"""Partition by method name, and balancing a global batch across data-parallel ranks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import UnknownNameError
from rl_core.balancing import BalancingError, balance_across_ranks, partition

from ._brute_force import assert_is_partition, optimal_max_load


def test_partition_dispatches_by_name() -> None:
    assert partition([7, 6, 5, 4, 3], 2, method="lpt").loads == [14, 11]
    assert sorted(partition([8, 7, 6, 5, 4], 2).loads) == [15, 15]
    with pytest.raises(UnknownNameError, match=r"unknown partition method 'kk'"):
        partition([1, 2], 2, method="kk")


def test_balance_by_hand() -> None:
    # 8 samples over 2 ranks, 4 each: 10+7+6+3 = 9+8+5+4 = 26 (total 52).
    ranks = balance_across_ranks([10, 9, 8, 7, 6, 5, 4, 3], 2)
    assert [len(r) for r in ranks] == [4, 4]
    counts = [10, 9, 8, 7, 6, 5, 4, 3]
    assert sorted(sum(counts[i] for i in r) for r in ranks) == [26, 26]


def test_attention_workload_changes_the_assignment() -> None:
    # By tokens, {90, 10} vs {50, 50} is a perfect 100 / 100 split; by L² (8100, 100, 2500, 2500) it is
    # 8200 / 5000, and {90} vs {10, 50, 50} = 8100 / 5100 is better.
    counts = [90, 10, 50, 50]
    by_tokens = balance_across_ranks(counts, 2, equal_size=False)
    assert sorted(sum(counts[i] for i in r) for r in by_tokens) == [100, 100]
    by_attention = balance_across_ranks(counts, 2, equal_size=False, workload=lambda c: [x * x for x in c])
    assert sorted(by_attention) == [[0], [1, 2, 3]]


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(1, 500), min_size=4, max_size=8), dp=st.integers(2, 3))
def test_equal_ranks_within_bound(counts: list[int], dp: int) -> None:
    counts = counts[: len(counts) - len(counts) % dp]
    ranks = balance_across_ranks(counts, dp)
    assert_is_partition(ranks, len(counts))
    assert {len(r) for r in ranks} == {len(counts) // dp}
    best = optimal_max_load(counts, dp, equal_size=True)
    assert max(sum(counts[i] for i in r) for r in ranks) <= (2 - 1 / dp) * best


def test_groups_go_to_one_rank() -> None:
    counts = [100, 120, 80, 90, 300, 310, 10, 20]
    groups = [0, 0, 1, 1, 2, 2, 3, 3]
    ranks = balance_across_ranks(counts, 2, group_ids=groups)
    for r in ranks:
        assert len(r) == 4
        for i in r:
            assert [j for j in range(8) if groups[j] == groups[i]] == [j for j in r if groups[j] == groups[i]]


def test_soft_groups_by_hand() -> None:
    # Whole groups {6, 3} and {5, 2} load 9 / 7; exchanging 6 for 5 evens it to 8 / 8.
    counts, groups = [6, 3, 5, 2], [0, 0, 1, 1]
    assert balance_across_ranks(counts, 2, group_ids=groups) == [[0, 1], [2, 3]]
    assert balance_across_ranks(counts, 2, group_ids=groups, soft_groups=True) == [[0, 3], [1, 2]]
    # Groups that already balance stay whole.
    assert balance_across_ranks([4, 4, 5, 3], 2, group_ids=groups, soft_groups=True) == [[0, 1], [2, 3]]


@settings(max_examples=40, deadline=None)
@given(
    group_loads=st.lists(st.lists(st.integers(1, 500), min_size=3, max_size=3), min_size=4, max_size=8),
    dp=st.integers(2, 4),
)
def test_soft_groups_never_worse_than_whole_groups(group_loads: list[list[int]], dp: int) -> None:
    group_loads = group_loads[: len(group_loads) - len(group_loads) % dp]
    counts = [c for group in group_loads for c in group]
    groups = [g for g, group in enumerate(group_loads) for _ in group]
    whole = balance_across_ranks(counts, dp, group_ids=groups)
    soft = balance_across_ranks(counts, dp, group_ids=groups, soft_groups=True)
    assert_is_partition(soft, len(counts))
    assert {len(r) for r in soft} == {len(counts) // dp}
    assert max(sum(counts[i] for i in r) for r in soft) <= max(sum(counts[i] for i in r) for r in whole)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([1, 2, 3], 2), {}, r"batch of 3 samples cannot be split evenly across dp_size=2 ranks"),
        (([1, 2], 0), {}, r"dp_size must be an int >= 1, got 0"),
        (([1, 0], 2), {}, r"token_counts\[1\] must be > 0"),
        (([1, 2, 3], 4), {"equal_size": False}, r"cannot split n=3 items into k=4"),
        (([1, 2], 2), {"group_ids": [0, 1], "soft_groups": 1}, r"soft_groups must be a bool, got 1"),
    ],
)
def test_rejections(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(BalancingError, match=message):
        balance_across_ranks(*args, **kwargs)
