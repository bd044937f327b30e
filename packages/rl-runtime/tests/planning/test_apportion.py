"""Apportioning slots: hand-worked shares, a brute-force optimality check, properties, and every rejection."""

from __future__ import annotations

import itertools
import logging
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_runtime.planning import APPORTION_STRATEGIES, InsufficientSlotsError, PlanningError
from rl_runtime.planning._apportion import apportion_even, apportion_param_aware


@pytest.mark.parametrize(
    ("weights", "slots", "expected"),
    [
        ((5, 3, 1), 7, (3, 2, 2)),  # 7 = 3 * 2 + 1: the one left over goes to the heaviest
        ((1, 5, 5), 8, (2, 3, 3)),  # two left over: the two heaviest, not the first two
        ((4, 4, 4), 6, (2, 2, 2)),
        ((0, 0, 0), 3, (1, 1, 1)),
        ((2, 2), 5, (3, 2)),  # a tie in weight: the earlier one
    ],
)
def test_even_by_hand(weights: tuple[int, ...], slots: int, expected: tuple[int, ...]) -> None:
    assert apportion_even(weights, slots) == expected


@pytest.mark.parametrize(
    ("weights", "slots", "expected"),
    [
        # quotas 8 * (7, 3, 1, 0) / 11 = 5.09, 2.18, 0.73, 0: the last two get 1 each; the other 6 go 4.2 : 1.8,
        # floors 4 and 1, and the remainder 0.8 beats 0.2.
        ((7000, 3000, 1000, 0), 8, (4, 2, 1, 1)),
        ((3, 1), 4, (3, 1)),  # exact quotas
        ((7, 1), 8, (7, 1)),
        ((1, 1, 1), 4, (2, 1, 1)),  # quotas 4/3 each: equal remainders, the earlier one gets the extra slot
        ((100, 1, 1), 4, (2, 1, 1)),  # two quotas of 0.04 pinned to 1, the heavy one gets the 2 left
        # quotas 5 * (6, 2, 1, 1) / 10 = 3, 1, .5, .5 pin the last two; then 3 * (6, 2) / 8 = 2.25, 0.75 pins the
        # second; the first gets the 2 slots left.
        ((6, 2, 1, 1), 5, (2, 1, 1, 1)),
        ((5,), 3, (3,)),
    ],
)
def test_param_aware_by_hand(weights: tuple[int, ...], slots: int, expected: tuple[int, ...]) -> None:
    assert apportion_param_aware(weights, slots) == expected


def test_param_aware_falls_back_to_even_when_no_weights(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rl_runtime.planning._apportion"):
        assert apportion_param_aware((0, 0, 0), 7) == apportion_even((0, 0, 0), 7) == (3, 2, 2)
    assert "apportioning evenly" in caplog.text


def test_registry_holds_both_strategies() -> None:
    assert APPORTION_STRATEGIES["even"] is apportion_even
    assert APPORTION_STRATEGIES["param_aware"] is apportion_param_aware


@pytest.mark.parametrize("strategy", [apportion_even, apportion_param_aware])
@pytest.mark.parametrize(
    ("weights", "slots", "error", "match"),
    [
        ((1, 1, 1), 2, InsufficientSlotsError, r"2 slots cannot hold 3 sub-graphs: each needs at least 1"),
        ((), 4, PlanningError, r"at least one sub-graph weight, got none"),
        ((1, -1), 4, PlanningError, r"weights\[1\] must be a non-negative int .*got -1"),
        ((1, True), 4, PlanningError, r"weights\[1\] must be a non-negative int .*got True"),
        ((1.5,), 4, PlanningError, r"weights\[0\] must be a non-negative int .*got 1.5"),
        ((1,), 2.0, PlanningError, r"slots must be an int, got 2.0"),
    ],
)
def test_rejections(strategy: object, weights: tuple, slots: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        strategy(weights, slots)  # type: ignore[operator]


def _squared_error(shares: tuple[int, ...], quotas: list[Fraction]) -> Fraction:
    return sum(((a - q) ** 2 for a, q in zip(shares, quotas, strict=True)), Fraction(0))


def test_param_aware_is_least_squares_optimal_when_no_quota_is_below_one() -> None:
    """Largest remainder minimises sum (share - quota)^2 over all integer shares summing to the slots (brute force)."""
    checked = 0
    for n in (1, 2, 3):
        for slots in range(n, 8):
            for weights in itertools.product(range(1, 6), repeat=n):
                quotas = [Fraction(slots * w, sum(weights)) for w in weights]
                if min(quotas) < 1:
                    continue
                best = min(
                    _squared_error(c, quotas)
                    for c in itertools.product(range(1, slots + 1), repeat=n)
                    if sum(c) == slots
                )
                assert _squared_error(apportion_param_aware(weights, slots), quotas) == best, (weights, slots)
                checked += 1
    assert checked > 100


weights_lists = st.lists(st.integers(0, 10**12), min_size=1, max_size=12)


@st.composite
def weights_and_slots(draw: st.DrawFn) -> tuple[list[int], int]:
    weights = draw(weights_lists)
    return weights, draw(st.integers(len(weights), 4 * len(weights) + 8))


@given(weights_and_slots())
def test_shares_sum_to_slots_and_are_at_least_one(case: tuple[list[int], int]) -> None:
    weights, slots = case
    for strategy in (apportion_even, apportion_param_aware):
        shares = strategy(weights, slots)
        assert len(shares) == len(weights)
        assert sum(shares) == slots
        assert min(shares) >= 1


@given(weights_and_slots())
def test_param_aware_is_monotone_in_weight(case: tuple[list[int], int]) -> None:
    weights, slots = case
    shares = apportion_param_aware(weights, slots)
    for i, j in itertools.permutations(range(len(weights)), 2):
        if weights[i] > weights[j]:
            assert shares[i] >= shares[j], (weights, slots, shares)
        elif weights[i] == weights[j]:
            assert abs(shares[i] - shares[j]) <= 1


@given(weights_and_slots())
def test_param_aware_stays_within_one_of_the_quota_when_none_is_pinned(case: tuple[list[int], int]) -> None:
    weights, slots = case
    total = sum(weights)
    if total == 0 or any(slots * w < total for w in weights):
        return
    for share, weight in zip(apportion_param_aware(weights, slots), weights, strict=True):
        quota = Fraction(slots * weight, total)
        assert math.floor(quota) <= share <= math.ceil(quota)


@given(weights_and_slots(), st.integers(1, 1000))
def test_param_aware_ignores_the_unit_of_weight(case: tuple[list[int], int], scale: int) -> None:
    weights, slots = case
    assert apportion_param_aware([w * scale for w in weights], slots) == apportion_param_aware(weights, slots)


@given(weights_and_slots())
def test_even_shares_are_within_one_and_favour_the_heavier(case: tuple[list[int], int]) -> None:
    weights, slots = case
    shares = apportion_even(weights, slots)
    assert max(shares) - min(shares) <= 1
    for i, j in itertools.permutations(range(len(weights)), 2):
        if weights[i] > weights[j]:
            assert shares[i] >= shares[j]


@given(weights_and_slots(), st.data())
def test_param_aware_never_takes_a_slot_from_a_sub_graph_that_grows(
    case: tuple[list[int], int], data: st.DataObject
) -> None:
    weights, slots = case
    index = data.draw(st.integers(0, len(weights) - 1))
    grown = [*weights]
    grown[index] += data.draw(st.integers(1, 10**12))
    assert apportion_param_aware(grown, slots)[index] >= apportion_param_aware(weights, slots)[index]
