"""CPGD's advantage: STD and equal weights, the clip-filter-like weight, and rejections."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.advantages import cpgd

from ._batches import outcome_batch, per_sequence

EPS = 1e-9

# Group 0: 1, 0, 0 (informative); group 1: 1, 1 (all equal); group 2: 0, 1 (informative). G = 3, 2 informative.
SCORES = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
IDS = [0, 0, 0, 1, 1, 2, 2]
THIRD = math.sqrt(1 / 3) + EPS
HALF = math.sqrt(1 / 2) + EPS
STD_WEIGHTED = [(2 / 3) / THIRD, (-1 / 3) / THIRD, (-1 / 3) / THIRD, 0.0, 0.0, -0.5 / HALF, 0.5 / HALF]


def test_cpgd_std_weight_by_hand() -> None:
    out = cpgd(outcome_batch(SCORES, IDS))
    assert per_sequence(out.advantages) == pytest.approx(STD_WEIGHTED, abs=1e-12)
    assert torch.equal(out.advantages, out.returns)


def test_cpgd_equal_weight_only_centres() -> None:
    out = cpgd(outcome_batch(SCORES, IDS), norm_by_std=False)
    assert per_sequence(out.advantages) == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0, -0.5, 0.5], abs=1e-12)


def test_cpgd_clip_filter_like_weight_scales_informative_groups() -> None:
    # 3 groups, 2 informative -> weight min(3 / 2, 3) = 1.5.
    out = cpgd(outcome_batch(SCORES, IDS), clip_filter_weight=True)
    assert per_sequence(out.advantages) == pytest.approx([1.5 * a for a in STD_WEIGHTED], abs=1e-12)


@pytest.mark.parametrize(("max_weight", "weight"), [(3.0, 3.0), (2.0, 2.0), (10.0, 4.0)])
def test_cpgd_clip_filter_like_weight_is_capped(max_weight: float, weight: float) -> None:
    # 4 groups, only group 0 informative -> weight min(4, max_weight).
    inputs = outcome_batch([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0], [0, 0, 1, 1, 2, 2, 3, 3])
    out = cpgd(inputs, norm_by_std=False, clip_filter_weight=True, max_weight=max_weight)
    assert per_sequence(out.advantages) == pytest.approx([weight * 0.5, weight * -0.5] + [0.0] * 6)


def test_cpgd_without_informative_groups_is_zero() -> None:
    out = cpgd(outcome_batch([1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1]), clip_filter_weight=True)
    assert per_sequence(out.advantages) == [0.0] * 4


def test_cpgd_equal_float_rewards_give_exactly_zero() -> None:
    # The mean of three 0.1s is not exactly 0.1; dividing that noise by a 1e-9 std would not give 0.
    assert per_sequence(cpgd(outcome_batch([0.1, 0.1, 0.1], [0, 0, 0])).advantages) == [0.0, 0.0, 0.0]


def test_cpgd_singleton_counts_as_informative() -> None:
    # Groups: singleton (score 2, mean 0, std 1) and an all-equal pair -> weight min(2 / 1, 3) = 2.
    out = cpgd(outcome_batch([2.0, 1.0, 1.0], [0, 1, 1]), clip_filter_weight=True, epsilon=1e-12)
    assert per_sequence(out.advantages) == pytest.approx([4.0, 0.0, 0.0])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"epsilon": 0.0}, "epsilon must be > 0, got 0.0"),
        ({"max_weight": 0.5}, r"max_weight must be >= 1.0 \(the weight only scales groups up\), got 0.5"),
        ({"max_weight": float("nan")}, "max_weight must be >= 1.0 .* got nan"),
    ],
)
def test_cpgd_rejects_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cpgd(outcome_batch([1.0, 0.0], [0, 0]), **params)
