"""DAPO dynamic sampling and the accuracy band: whole groups kept or dropped."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.shaping import GroupFilterResult, accuracy_band_mask, dynamic_sampling_mask


def test_dynamic_sampling_keeps_only_mixed_groups_by_hand() -> None:
    # id 3: 1, 0, 1 (varied, kept); id 1: 1, 1 (constant); id 7: a singleton; id 2: 1 and 1 + 1e-9 (float noise,
    # constant); id 5: 0 and 0.1 (kept). Groups are interleaved on purpose.
    scores = torch.tensor([1.0, 1.0, 0.5, 1.0, 0.0, 1.0 + 1e-9, 0.0, 1.0, 0.1], dtype=torch.float64)
    group_ids = torch.tensor([3, 1, 7, 2, 3, 2, 5, 3, 5])
    result = dynamic_sampling_mask(scores, group_ids)
    assert isinstance(result, GroupFilterResult)
    assert result.keep.tolist() == [True, False, False, False, True, False, True, True, True]
    assert result.keep.dtype == torch.bool
    assert (result.num_groups, result.num_kept_groups) == (5, 2)


def test_singletons_are_kept_on_request() -> None:
    result = dynamic_sampling_mask(torch.tensor([0.3, 1.0, 1.0]), torch.tensor([9, 4, 4]), keep_singletons=True)
    assert result.keep.tolist() == [True, False, False]
    assert result.num_kept_groups == 1


def test_epsilon_zero_is_an_exact_test() -> None:
    # 1 vs 1 + 1e-9 has std 5e-10: constant for the default epsilon, varied for epsilon = 0 (verl's `std > 0`).
    scores = torch.tensor([1.0, 1.0 + 1e-9], dtype=torch.float64)
    ids = torch.tensor([0, 0])
    assert dynamic_sampling_mask(scores, ids).keep.tolist() == [False, False]
    assert dynamic_sampling_mask(scores, ids, epsilon=0.0).keep.tolist() == [True, True]
    assert dynamic_sampling_mask(torch.tensor([2.0, 2.0]), ids, epsilon=0.0).keep.tolist() == [False, False]


def test_std_is_the_population_std() -> None:
    # Scores 0 and 2: population std 1, sample std sqrt(2) = 1.41. Only the population std fails `> 1.2`.
    scores = torch.tensor([0.0, 2.0])
    ids = torch.tensor([0, 0])
    assert dynamic_sampling_mask(scores, ids, epsilon=1.2).keep.tolist() == [False, False]
    assert dynamic_sampling_mask(scores, ids, epsilon=0.99).keep.tolist() == [True, True]


def test_dynamic_sampling_of_an_empty_batch() -> None:
    result = dynamic_sampling_mask(torch.zeros(0), torch.zeros(0, dtype=torch.long))
    assert result.keep.shape == (0,)
    assert (result.num_groups, result.num_kept_groups) == (0, 0)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=16))
def test_dynamic_sampling_matches_a_plain_loop(pairs: list[tuple[int, float]]) -> None:
    ids = torch.tensor([group for group, _ in pairs])
    scores = torch.tensor([score for _, score in pairs])
    result = dynamic_sampling_mask(scores, ids)
    kept_groups = set()
    for group in {g for g, _ in pairs}:
        members = [score for other, score in pairs if other == group]
        mean = sum(members) / len(members)
        std = math.sqrt(sum((m - mean) ** 2 for m in members) / len(members))
        if len(members) > 1 and std > 1e-6:
            kept_groups.add(group)
    assert result.keep.tolist() == [group in kept_groups for group, _ in pairs]
    assert result.num_groups == len({g for g, _ in pairs})
    assert result.num_kept_groups == len(kept_groups)


@pytest.mark.parametrize(
    ("scores", "group_ids", "kwargs", "error", "match"),
    [
        (torch.tensor([1, 0]), torch.tensor([0, 0]), {}, ShapeError, "scores must have a floating dtype"),
        (torch.zeros(2, 2), torch.tensor([0, 0]), {}, ShapeError, r"scores must have shape \(B\)"),
        (torch.zeros(2), torch.tensor([0.0, 0.0]), {}, ShapeError, "group_ids must have an integer or bool dtype"),
        (torch.zeros(3), torch.tensor([0, 0]), {}, ShapeError, "group_ids must have shape .* B=3"),
        (torch.zeros(2), torch.tensor([0, 0]), {"epsilon": -1.0}, ValueError, "epsilon must be >= 0"),
        (torch.tensor([0.0, float("nan")]), torch.tensor([0, 0]), {}, ValueError, "scores must be finite"),
    ],
)
def test_dynamic_sampling_rejects(
    scores: torch.Tensor, group_ids: torch.Tensor, kwargs: dict[str, float], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        dynamic_sampling_mask(scores, group_ids, **kwargs)


def test_accuracy_band_is_inclusive_by_hand() -> None:
    # Groups of 10: 1 success (0.1, kept), 0 (dropped), 9 (0.9, kept), 10 (dropped); a group of 5 with 3 (0.6, kept).
    counts = {0: 1, 1: 0, 2: 9, 3: 10}
    success = [i < hits for hits in counts.values() for i in range(10)] + [True, False, True, False, True]
    group_ids = torch.tensor([g for g in counts for _ in range(10)] + [4] * 5)
    keep = accuracy_band_mask(torch.tensor(success), group_ids)
    expected_groups = {0, 2, 4}
    assert keep.tolist() == [int(g) in expected_groups for g in group_ids]
    # The same answer from 0/1 integers and 0/1 floats (float32, where 0.9 is not exact).
    assert torch.equal(accuracy_band_mask(torch.tensor(success).long(), group_ids), keep)
    assert torch.equal(accuracy_band_mask(torch.tensor(success).float(), group_ids), keep)


def test_accuracy_band_with_fractional_success_and_custom_bounds() -> None:
    # Group 0 mean 0.5, group 1 mean 0.25, group 2 mean 0.75.
    success = torch.tensor([0.25, 0.75, 0.0, 0.5, 1.0, 0.5])
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    assert accuracy_band_mask(success, ids, lower=0.25, upper=0.5).tolist() == [True, True, True, True, False, False]
    assert accuracy_band_mask(success, ids, lower=0.0, upper=1.0).all()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=20),
    st.sampled_from([(0.1, 0.9), (0.0, 0.5), (0.5, 1.0), (0.25, 0.75)]),
)
def test_accuracy_band_matches_a_plain_loop(pairs: list[tuple[int, bool]], bounds: tuple[float, float]) -> None:
    lower, upper = bounds
    keep = accuracy_band_mask(
        torch.tensor([s for _, s in pairs]), torch.tensor([g for g, _ in pairs]), lower=lower, upper=upper
    )
    for i, (group, _) in enumerate(pairs):
        members = [s for other, s in pairs if other == group]
        assert keep[i].item() == (lower <= sum(members) / len(members) <= upper)


@pytest.mark.parametrize(
    ("success", "group_ids", "kwargs", "error", "match"),
    [
        (torch.tensor([True]), torch.tensor([0]), {"lower": 0.6, "upper": 0.4}, ValueError, "lower=0.6, upper=0.4"),
        (torch.tensor([True]), torch.tensor([0]), {"upper": 1.5}, ValueError, "0 <= lower <= upper <= 1"),
        (torch.tensor([True]), torch.tensor([0]), {"lower": -0.1}, ValueError, "0 <= lower <= upper <= 1"),
        (torch.tensor([1.5, 0.0]), torch.tensor([0, 0]), {}, ValueError, r"success must hold values in \[0, 1\]"),
        (torch.tensor([float("nan")]), torch.tensor([0]), {}, ValueError, r"success must hold values in \[0, 1\]"),
        (torch.tensor([2, 0]), torch.tensor([0, 0]), {}, ShapeError, "success must hold only 0/1"),
        (torch.tensor([True, False]), torch.tensor([0]), {}, ShapeError, "group_ids must have shape .* B=2"),
        (torch.tensor([True]), torch.tensor([0.0]), {}, ShapeError, "group_ids must have an integer"),
        (torch.tensor([[True]]), torch.tensor([0]), {}, ShapeError, r"success must have shape \(B\)"),
    ],
)
def test_accuracy_band_rejects(
    success: torch.Tensor, group_ids: torch.Tensor, kwargs: dict[str, float], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        accuracy_band_mask(success, group_ids, **kwargs)
