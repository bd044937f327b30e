"""The Partition result and the shared argument checks."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.balancing import BalancingError, Partition, max_over_mean
from rl_core.balancing._partition import check_positive_int, check_token_counts, check_workloads


def test_from_parts_sums_loads() -> None:
    result = Partition.from_parts([[0, 2], [1]], [1.0, 4.0, 2.0])
    assert result.loads == [3.0, 4.0]
    assert result.max_over_mean == pytest.approx(4.0 / 3.5)


def test_max_over_mean_by_hand() -> None:
    assert max_over_mean([3, 1]) == 1.5
    assert max_over_mean([0, 0]) == 1.0
    assert max_over_mean([]) == 1.0


def test_check_workloads_accepts_numbers_and_tensors() -> None:
    assert check_workloads([1, 2.5, 0]) == [1, 2.5, 0]
    assert check_workloads(torch.tensor([1.0, 2.0])) == [1.0, 2.0]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], r"workloads is empty"),
        ([1, -2], r"workloads\[1\] must be a finite number >= 0, got -2"),
        ([1, math.nan], r"workloads\[1\] must be a finite number >= 0, got nan"),
        ([math.inf, 1], r"workloads\[0\] must be a finite number >= 0, got inf"),
        ([1, "2"], r"workloads\[1\] must be an int or a float, got '2'"),
        ([True, 1], r"workloads\[0\] must be an int or a float, got True"),
        ("12", r"workloads must be a sequence of numbers or a 1-D tensor, got str"),
        (torch.ones(2, 2), r"workloads must be a 1-D tensor \(n,\), got shape \(2, 2\)"),
        (torch.tensor([True]), r"workloads must hold real numbers, got dtype torch.bool"),
    ],
)
def test_check_workloads_rejects(values: object, message: str) -> None:
    with pytest.raises(BalancingError, match=message):
        check_workloads(values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([5, 0, 3], r"token_counts\[1\] must be > 0 \(a sample has at least one token\), got 0"),
        ([5, 3, -1], r"token_counts\[2\] must be > 0"),
        ([5, 2.0], r"token_counts\[1\] must be an int token count, got 2.0"),
        ([], r"token_counts is empty"),
    ],
)
def test_check_token_counts_rejects(values: list, message: str) -> None:
    with pytest.raises(BalancingError, match=message):
        check_token_counts(values)


@pytest.mark.parametrize("value", [0, -1, 2.0, True, None])
def test_check_positive_int_rejects(value: object) -> None:
    with pytest.raises(BalancingError, match=r"num_parts must be an int >= 1"):
        check_positive_int(value, "num_parts")
