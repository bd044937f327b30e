"""Token-budget micro-batching: hand-worked plans, brute-force counts, properties across ranks, rejections."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.balancing import (
    BalancingError,
    MicroBatchPlan,
    min_num_micro_batches,
    plan_micro_batches,
    plan_micro_batches_all_ranks,
)

from ._brute_force import assert_is_partition, min_bins


def check_plan(plan: MicroBatchPlan, counts: list[int], max_tokens: int) -> None:
    """Every sample once, no empty micro-batch, budget kept except by reported single oversized samples."""
    assert_is_partition(plan.micro_batches, len(counts))
    assert plan.oversized == [i for i, c in enumerate(counts) if c > max_tokens]
    assert plan.token_loads == [sum(counts[i] for i in mb) for mb in plan.micro_batches]
    for mb, load in zip(plan.micro_batches, plan.token_loads, strict=True):
        if load > max_tokens:
            assert len(mb) == 1
            assert mb[0] in plan.oversized
    assert plan.token_loads == sorted(plan.token_loads, reverse=True)


def test_balanced_within_the_rank() -> None:
    # 1400 tokens under 1000 need 2 micro-batches; 400+200+100 = 300+300+100 = 700.
    counts = [400, 300, 300, 200, 100, 100]
    plan = plan_micro_batches(counts, 1000)
    assert plan.micro_batches == [[0, 3, 5], [1, 2, 4]]
    assert plan.token_loads == [700, 700]
    assert plan.oversized == []
    assert plan.num_micro_batches == 2


def test_three_that_cannot_pair() -> None:
    # Any two of 600 exceed 1000: three micro-batches although 1800 / 1000 rounds up to 2.
    assert min_num_micro_batches([600, 600, 600], 1000) == 3
    assert plan_micro_batches([600, 600, 600], 1000).micro_batches == [[0], [1], [2]]


def test_oversized_sample_is_alone_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    counts = [100, 200, 300, 50, 5000, 700]
    with caplog.at_level(logging.WARNING, logger="rl_core.balancing._micro_batch"):
        plan = plan_micro_batches(counts, 1000)
    assert plan.oversized == [4]
    assert plan.micro_batches[0] == [4]
    assert plan.token_loads == [5000, 700, 650]
    assert "exceed max_tokens=1000" in caplog.text
    check_plan(plan, counts, 1000)


def test_more_micro_batches_than_the_minimum() -> None:
    counts = [400, 300, 300, 200, 100, 100]
    plan = plan_micro_batches(counts, 1000, num_micro_batches=3)
    assert plan.token_loads == [500, 500, 400]
    check_plan(plan, counts, 1000)
    plan = plan_micro_batches(counts, 1000, num_micro_batches=6)
    assert plan.token_loads == [400, 300, 300, 200, 100, 100]


def test_attention_workload_keeps_the_budget() -> None:
    counts = [900, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    plan = plan_micro_batches(counts, 1000, num_micro_batches=3, workload="attention")
    check_plan(plan, counts, 1000)
    assert plan.num_micro_batches == 3


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 10), min_size=1, max_size=6), max_tokens=st.integers(10, 20))
def test_count_between_optimum_and_first_fit(counts: list[int], max_tokens: int) -> None:
    best = min_bins(counts, max_tokens)
    found = min_num_micro_batches(counts, max_tokens)
    # First-fit decreasing uses at most 11/9 OPT + 6/9 bins (Dósa, 2007); the search never exceeds it.
    assert best <= found <= 11 / 9 * best + 6 / 9
    check_plan(plan_micro_batches(counts, max_tokens), counts, max_tokens)


rank_counts = st.lists(st.integers(1, 3000), min_size=1, max_size=24)


@settings(max_examples=80, deadline=None)
@given(per_rank=st.lists(rank_counts, min_size=1, max_size=4), max_tokens=st.integers(500, 4000))
def test_all_ranks_get_the_same_count(per_rank: list[list[int]], max_tokens: int) -> None:
    target = max(min_num_micro_batches(c, max_tokens) for c in per_rank)
    if any(len(c) < target for c in per_rank):
        with pytest.raises(BalancingError, match=r"rank \d+ has \d+ samples but every rank needs"):
            plan_micro_batches_all_ranks(per_rank, max_tokens)
        return
    plans = plan_micro_batches_all_ranks(per_rank, max_tokens)
    assert {p.num_micro_batches for p in plans} == {target}
    for plan, counts in zip(plans, per_rank, strict=True):
        check_plan(plan, counts, max_tokens)


@settings(max_examples=60, deadline=None)
@given(counts=rank_counts, max_tokens=st.integers(500, 4000), extra=st.integers(0, 24))
def test_any_count_from_minimum_to_sample_count(counts: list[int], max_tokens: int, extra: int) -> None:
    target = min(len(counts), min_num_micro_batches(counts, max_tokens) + extra)
    plan = plan_micro_batches(counts, max_tokens, num_micro_batches=target, workload="attention")
    assert plan.num_micro_batches == target
    check_plan(plan, counts, max_tokens)


@pytest.mark.parametrize("max_tokens", [0, -5, 1.5, True, None])
def test_rejects_bad_budget(max_tokens: object) -> None:
    with pytest.raises(BalancingError, match=r"max_tokens must be an int > 0"):
        plan_micro_batches([1, 2], max_tokens)  # type: ignore[arg-type]
    with pytest.raises(BalancingError, match=r"max_tokens must be an int > 0"):
        min_num_micro_batches([1, 2], max_tokens)  # type: ignore[arg-type]


def test_rejections() -> None:
    with pytest.raises(BalancingError, match=r"token_counts\[2\] must be > 0"):
        plan_micro_batches([5, 3, 0], 10)
    with pytest.raises(BalancingError, match=r"token_counts_per_rank\[1\]\[0\] must be > 0"):
        plan_micro_batches_all_ranks([[5], [-1]], 10)
    with pytest.raises(BalancingError, match=r"num_micro_batches=1 is below this rank's minimum 3"):
        plan_micro_batches([600, 600, 600], 1000, num_micro_batches=1)
    with pytest.raises(BalancingError, match=r"num_micro_batches=4 exceeds this rank's 3 samples"):
        plan_micro_batches([600, 600, 600], 1000, num_micro_batches=4)
    with pytest.raises(BalancingError, match=r"num_micro_batches must be an int >= 1, got 0"):
        plan_micro_batches([1], 10, num_micro_batches=0)
    with pytest.raises(BalancingError, match=r"rank 1 has 1 samples but every rank needs 3"):
        plan_micro_batches_all_ranks([[600, 600, 600], [5]], 1000)
    with pytest.raises(BalancingError, match=r"token_counts_per_rank is empty"):
        plan_micro_batches_all_ranks([], 1000)
    with pytest.raises(BalancingError, match=r"one sequence of counts per rank"):
        plan_micro_batches_all_ranks("12", 1000)  # type: ignore[arg-type]
