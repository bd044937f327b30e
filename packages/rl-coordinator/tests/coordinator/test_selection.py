"""Selection of a step's samples (arrival order, filters, whole groups) and the split across ranks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import StepSpec
from rl_coordinator.coordinator._selection import (
    PendingSample,
    batch_units,
    candidate_groups,
    count_selectable,
    select,
    split_across_ranks,
)


def queue_of(*groups: int, tokens: list[int] | None = None) -> list[PendingSample]:
    counts = tokens or [5] * len(groups)
    return [
        PendingSample(SampleInfo(f"u{i}", g, 1, t - 1), "ref", i)
        for i, (g, t) in enumerate(zip(groups, counts, strict=True))
    ]


def test_candidate_units_by_hand() -> None:
    queue = queue_of(7, 8, 7, 9, 8, 7, 7)
    assert list(candidate_groups(queue, StepSpec(1, 1))) == [[i] for i in range(7)]
    # Unsized groups: every pending member, groups in order of first arrival.
    assert list(candidate_groups(queue, StepSpec(1, 1, group_aware=True))) == [[0, 2, 5, 6], [1, 4], [3]]
    # Sized groups: in order of completion; the 3rd and 4th sample of group 7 start a second group of 7.
    assert list(candidate_groups(queue, StepSpec(1, 2, group_aware=True, group_size=2))) == [[0, 2], [1, 4], [5, 6]]


def test_select_takes_the_first_passing_samples_and_drops_rejects_ahead_of_the_cut() -> None:
    queue = queue_of(0, 0, 0, 0, 0, tokens=[2, 3, 4, 5, 6])
    odd = lambda i: i.total_tokens % 2 == 1  # noqa: E731
    pick = select(queue, StepSpec(1, 2), odd)
    assert pick is not None and (pick.taken, pick.dropped) == ([1, 3], [0, 2])
    assert select(queue, StepSpec(1, 3), odd) is None
    assert count_selectable(queue, StepSpec(1, 3), odd) == 2
    assert count_selectable(queue, StepSpec(1, 3), None) == 5


def test_unsized_group_that_overshoots_is_skipped_not_taken_in_part() -> None:
    queue = queue_of(1, 1, 1, 2, 2)
    pick = select(queue, StepSpec(1, 2, group_aware=True), None)
    assert pick is not None and (pick.taken, pick.dropped) == ([3, 4], [])


def test_contiguous_and_balanced_splits_by_hand() -> None:
    infos = [SampleInfo(f"u{i}", 0, 1, t - 1) for i, t in enumerate([10, 10, 1, 1])]
    assert split_across_ranks(infos, StepSpec(2, 4, balance=False)) == [[0, 1], [2, 3]]
    parts = split_across_ranks(infos, StepSpec(2, 4))
    assert sorted(parts) == [[0, 2], [1, 3]] or sorted(parts) == [[0, 3], [1, 2]]
    assert [sum(infos[i].total_tokens for i in part) for part in parts] == [11, 11]


@settings(max_examples=30, deadline=None)
@given(
    groups_per_rank=st.integers(1, 3),
    dp_size=st.integers(1, 4),
    group_size=st.integers(1, 4),
    data=st.data(),
)
def test_group_aware_balanced_split_keeps_groups_whole_with_equal_counts(
    groups_per_rank: int, dp_size: int, group_size: int, data: st.DataObject
) -> None:
    n_groups = groups_per_rank * dp_size
    tokens = data.draw(st.lists(st.integers(1, 50), min_size=n_groups * group_size, max_size=n_groups * group_size))
    infos = [SampleInfo(f"u{i}", i // group_size, 1, t) for i, t in enumerate(tokens)]
    spec = StepSpec(dp_size, n_groups * group_size, group_aware=True, group_size=group_size)
    parts = split_across_ranks(infos, spec)
    assert sorted(i for part in parts for i in part) == list(range(len(infos)))
    assert {len(part) for part in parts} == {spec.per_rank}
    owner = {infos[i].group_id: rank for rank, part in enumerate(parts) for i in part}
    assert all(owner[infos[i].group_id] == rank for rank, part in enumerate(parts) for i in part)


def test_split_of_unequal_groups_is_rejected_by_the_balancer() -> None:
    infos = [SampleInfo(f"u{i}", g, 1, 4) for i, g in enumerate([1, 2, 2, 2])]
    with pytest.raises(CoordinatorInputError, match=r"same size"):
        split_across_ranks(infos, StepSpec(2, 4, group_aware=True))


def test_keep_batches_puts_each_producer_batch_on_one_rank() -> None:
    tokens = [9, 1, 8, 2, 7, 3, 6, 4]
    infos = [SampleInfo(f"u{i}", i, 1, t) for i, t in enumerate(tokens)]
    keys = ["ref-a", "ref-a", "ref-b", "ref-b", "ref-c", "ref-c", "ref-d", "ref-d"]
    parts = split_across_ranks(infos, StepSpec(2, 8, keep_batches=True), keys)
    assert all(len({keys[i] for i in part}) == 2 for part in parts)  # two whole batches per rank
    # Batch loads (1 + t each): a 12, b 12, c 12, d 12, so any pairing balances exactly.
    assert [sum(infos[i].total_tokens for i in part) for part in parts] == [24, 24]


def test_batch_units_by_hand() -> None:
    # Batches of 4 and 2, 2 samples per rank: runs of gcd(4, 2, 2) = 2.
    keys = ["a", "b", "a", "a", "b", "a"]
    assert batch_units(keys, 2) == [("a", 0), ("b", 0), ("a", 0), ("a", 1), ("b", 0), ("a", 1)]
    assert batch_units(["a", "a", "a", "b"], 2) is None  # a batch of 3: runs of one sample


def test_keep_batches_cuts_batches_larger_than_a_share_into_runs() -> None:
    # 2 batches of 4 over 4 ranks of 2: each rank gets one run of 2 from one batch when that balances.
    tokens = [5, 5, 3, 7, 6, 4, 2, 8]
    infos = [SampleInfo(f"u{i}", i, 1, t - 1) for i, t in enumerate(tokens)]
    keys = ["a"] * 4 + ["b"] * 4
    parts = split_across_ranks(infos, StepSpec(4, 8, keep_batches=True), keys)
    assert sorted(parts) == [[0, 1], [2, 3], [4, 5], [6, 7]]  # every run loads 10
    assert all(len({keys[i] for i in part}) == 1 for part in parts)


def test_keep_batches_falls_back_to_samples_when_runs_would_be_single_samples() -> None:
    infos = [SampleInfo(f"u{i}", i, 1, 1 + i) for i in range(8)]
    keys = ["a", "a", "a", "b", "c", "c", "d", "d"]  # a batch of 3
    parts = split_across_ranks(infos, StepSpec(4, 8, keep_batches=True), keys)
    assert parts == split_across_ranks(infos, StepSpec(4, 8, keep_batches=False), keys)


def test_group_aware_takes_precedence_over_keep_batches() -> None:
    infos = [SampleInfo(f"u{i}", i % 2, 1, 3) for i in range(4)]
    spec = StepSpec(2, 4, group_aware=True, group_size=2, keep_batches=True)
    parts = split_across_ranks(infos, spec, ["x", "x", "y", "y"])
    assert sorted(parts) == [[0, 2], [1, 3]]  # grouped by group_id (0, 1), not by payload key
