"""Workload estimators: token count and a·L + L², by name and by callable."""

from __future__ import annotations

import functools

import pytest
import torch

from rl_core import UnknownNameError
from rl_core.balancing import (
    DEFAULT_LINEAR_COEFF,
    WORKLOADS,
    BalancingError,
    attention_workload,
    compute_workloads,
    token_workload,
)


def test_token_workload_is_the_count() -> None:
    assert token_workload([3, 1, 7]) == [3, 1, 7]
    assert token_workload(torch.tensor([2, 5])) == [2, 5]


def test_attention_workload_by_hand() -> None:
    # a = 2: 2·1 + 1 = 3, 2·10 + 100 = 120.
    assert attention_workload([1, 10], linear_coeff=2) == [3, 120]
    # Default a = 6 · 4096 = 24576: 24576·1000 + 1000² = 25_576_000.
    assert DEFAULT_LINEAR_COEFF == 24576
    assert attention_workload([1000]) == [25_576_000]


def test_compute_workloads_by_name_and_callable() -> None:
    assert set(WORKLOADS) >= {"tokens", "attention"}
    assert compute_workloads([4, 2], "tokens") == [4, 2]
    assert compute_workloads([4, 2], "attention") == attention_workload([4, 2])
    assert compute_workloads([4, 2], functools.partial(attention_workload, linear_coeff=0)) == [16, 4]


@pytest.mark.parametrize("coeff", [-1, float("inf"), "2", None])
def test_attention_rejects_bad_coeff(coeff: object) -> None:
    with pytest.raises(BalancingError, match=r"linear_coeff must be a finite number >= 0"):
        attention_workload([1], linear_coeff=coeff)  # type: ignore[arg-type]


def test_rejections() -> None:
    with pytest.raises(BalancingError, match=r"token_counts\[1\] must be > 0"):
        attention_workload([3, 0])
    with pytest.raises(UnknownNameError, match=r"unknown workload 'token'.*did you mean 'tokens'"):
        compute_workloads([1], "token")
    with pytest.raises(BalancingError, match=r"returned 1 costs for 2 samples"):
        compute_workloads([1, 2], lambda counts: [1])
    with pytest.raises(BalancingError, match=r"workload must be a name in .* or a callable, got 3"):
        compute_workloads([1], 3)  # type: ignore[arg-type]
