"""Karmarkar–Karp: hand-worked cases, a plain reference implementation, brute-force optima and their bounds."""

from __future__ import annotations

import heapq
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.balancing import BalancingError, karmarkar_karp

from ._brute_force import assert_is_partition, optimal_max_load


def reference_kk_loads(values: list[float], k: int, equal_size: bool) -> list[float]:
    """Largest differencing written plainly (lists of sums, full re-sorts): the sorted final loads."""
    ordered = sorted(values, reverse=True)
    if equal_size:
        starts = [ordered[i : i + k] for i in range(0, len(ordered), k)]
    else:
        starts = [[v] + [0.0] * (k - 1) for v in ordered]
    heap = [(-(s[0] - s[-1]), i, s) for i, s in enumerate(starts)]
    heapq.heapify(heap)
    counter = len(heap)
    while len(heap) > 1:
        a, b = heapq.heappop(heap)[2], heapq.heappop(heap)[2]
        merged = sorted((x + y for x, y in zip(a, reversed(b), strict=True)), reverse=True)
        heapq.heappush(heap, (-(merged[0] - merged[-1]), counter, merged))
        counter += 1
    return sorted(heap[0][2])


def test_two_way_textbook_example() -> None:
    # Differencing {8,7,6,5,4}: 8-7=1, 6-5=1, 4-1=3, 3-1=2 -> discrepancy 2, loads 16/14 (optimum 15/15).
    plain = karmarkar_karp([8, 7, 6, 5, 4], 2, refine=False)
    assert sorted(plain.loads) == [14, 16]
    assert sorted(plain.parts) == [[0, 2], [1, 3, 4]]
    assert plain.max_over_mean == pytest.approx(16 / 15)
    # Gap 2: the refinement exchanges 7 (heavy part) for 6 (light part), reaching the optimum 15/15.
    refined = karmarkar_karp([8, 7, 6, 5, 4], 2)
    assert sorted(refined.loads) == [15, 15]
    assert sorted(refined.parts) == [[0, 1], [2, 3, 4]]


def test_equal_size_three_way_by_hand() -> None:
    # Rows {8,7,6} and {5,4,3}: pairing largest with smallest gives 8+3, 7+4, 6+5 = 11 each.
    result = karmarkar_karp([8, 7, 6, 5, 4, 3], 3, equal_size=True)
    assert sorted(result.parts) == [[0, 5], [1, 4], [2, 3]]
    assert result.loads == [11, 11, 11]
    assert result.max_over_mean == 1.0


@pytest.mark.parametrize("equal_size", [False, True])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_plain_matches_reference_implementation(k: int, equal_size: bool) -> None:
    rng = random.Random(k)
    values = [rng.uniform(1.0, 100.0) for _ in range(k * 12)]  # distinct, so heap ties do not occur
    result = karmarkar_karp(values, k, equal_size=equal_size, refine=False)
    assert sorted(result.loads) == pytest.approx(reference_kk_loads(values, k, equal_size))
    assert_is_partition(result.parts, len(values))


small_items = st.lists(st.integers(1, 60), min_size=2, max_size=8)


@settings(max_examples=60, deadline=None)
@given(values=small_items, k=st.integers(2, 3))
def test_unconstrained_within_bound_of_optimum(values: list[int], k: int) -> None:
    if len(values) < k:
        return
    best = optimal_max_load(values, k)
    plain = karmarkar_karp(values, k, refine=False)
    refined = karmarkar_karp(values, k)
    # Largest differencing is at most (4/3 - 1/(3k)) times optimal (Michiels et al., 2003).
    assert best <= max(plain.loads) <= (4 / 3 - 1 / (3 * k)) * best + 1e-9
    assert best <= max(refined.loads) <= max(plain.loads)
    assert_is_partition(refined.parts, len(values))
    for part, load in zip(refined.parts, refined.loads, strict=True):
        assert load == sum(values[i] for i in part)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(1, 60), min_size=4, max_size=8), k=st.integers(2, 3))
def test_equal_size_within_bound_of_optimum(values: list[int], k: int) -> None:
    values = values[: len(values) - len(values) % k]
    best = optimal_max_load(values, k, equal_size=True)
    plain = karmarkar_karp(values, k, equal_size=True, refine=False)
    refined = karmarkar_karp(values, k, equal_size=True)
    # Balanced largest differencing is at most (2 - 1/k) times the equal-size optimum (Michiels et al., 2003).
    assert best <= max(plain.loads) <= (2 - 1 / k) * best + 1e-9
    assert best <= max(refined.loads) <= max(plain.loads)
    for result in (plain, refined):
        assert_is_partition(result.parts, len(values))
        assert {len(part) for part in result.parts} == {len(values) // k}


def test_large_skewed_batch_is_balanced_to_half_a_percent() -> None:
    rng = random.Random(0)
    lengths = []
    for _ in range(512):
        base = math.log(1000) + rng.gauss(0, 0.8)
        lengths += [min(20000, max(1, round(math.exp(base + rng.gauss(0, 0.6))))) for _ in range(16)]
    for k in (8, 16, 64):
        result = karmarkar_karp(lengths, k, equal_size=True)
        assert result.max_over_mean <= 1.005
        assert {len(part) for part in result.parts} == {len(lengths) // k}
        assert_is_partition(result.parts, len(lengths))


def test_unconstrained_handles_more_items_than_one_state_holds() -> None:
    values = [float(v) for v in range(1, 41)]
    result = karmarkar_karp(values, 7)
    assert_is_partition(result.parts, 40)
    assert len(result.parts) == 7
    assert result.max_over_mean <= 1.01


def test_groups_stay_together_and_equal_size_counts_samples() -> None:
    workloads = [9, 1, 5, 5, 2, 8, 4, 6]
    groups = [0, 0, 1, 1, 2, 2, 3, 3]  # group loads 10, 10, 10, 10
    result = karmarkar_karp(workloads, 2, equal_size=True, group_ids=groups)
    assert result.loads == [20, 20]
    for part in result.parts:
        assert len(part) == 4
        assert {groups[i] for i in part}.isdisjoint({groups[i] for i in set(range(8)) - set(part)})


def test_accepts_a_tensor() -> None:
    result = karmarkar_karp(torch.tensor([3, 1, 2, 2]), 2, equal_size=True)
    assert result.loads == [4, 4]


def test_one_part_holds_everything() -> None:
    result = karmarkar_karp([3, 1, 2], 1, equal_size=True)
    assert result.parts == [[0, 1, 2]]
    assert result.loads == [6]


def test_equal_size_rejects_indivisible_count() -> None:
    with pytest.raises(BalancingError, match=r"n=10 to be divisible by num_parts k=4"):
        karmarkar_karp(list(range(1, 11)), 4, equal_size=True)
