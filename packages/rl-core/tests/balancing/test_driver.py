"""Shared driver: groups kept together, equal-size rules, the method registry, rejections."""

from __future__ import annotations

import pytest
import torch

from rl_core import DuplicateNameError
from rl_core.balancing import PARTITION_METHODS, BalancingError, karmarkar_karp, register_method

from ._brute_force import assert_is_partition


def test_methods_are_registered() -> None:
    assert {"karmarkar_karp", "lpt"} <= set(PARTITION_METHODS)


def test_registering_a_name_twice_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match=r"'lpt' is already registered"):
        register_method("lpt")(lambda w, k, eq: ([], []))


def test_groups_given_as_tensor_in_first_appearance_order() -> None:
    # Groups 7: {0, 3}, 2: {1, 2}, 5: {4, 5}; loads 4, 4, 8 -> {7, 2} vs {5}.
    result = karmarkar_karp([1, 2, 2, 3, 4, 4], 2, group_ids=torch.tensor([7, 2, 2, 7, 5, 5]))
    assert sorted(result.parts) == [[0, 1, 2, 3], [4, 5]]
    assert result.loads == [8, 8]
    assert_is_partition(result.parts, 6)


def test_equal_size_groups_give_equal_sample_counts() -> None:
    workloads = list(range(1, 25))
    groups = [i // 3 for i in range(24)]  # 8 groups of 3
    result = karmarkar_karp(workloads, 4, equal_size=True, group_ids=groups)
    assert [len(p) for p in result.parts] == [6, 6, 6, 6]
    for part in result.parts:
        assert len({groups[i] for i in part}) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_ids": [0, 0, 1]}, r"group_ids has 3 entries but there are 4 items"),
        ({"group_ids": torch.zeros(2, 2)}, r"group_ids must be a 1-D tensor \(n,\), got shape \(2, 2\)"),
        ({"group_ids": "abcd"}, r"group_ids must be a sequence or a 1-D tensor, got str"),
        ({"group_ids": [0, 0, 0, 0]}, r"cannot split 1 groups into k=2 non-empty parts"),
        (
            {"group_ids": [0, 0, 0, 1], "equal_size": True},
            r"every group to have the same size .*groups of 1 \(item 3\) and 3 \(item 0\)",
        ),
        ({"num_parts": 0}, r"num_parts must be an int >= 1, got 0"),
    ],
)
def test_rejections(kwargs: dict, message: str) -> None:
    args = {"num_parts": 2, **kwargs}
    with pytest.raises(BalancingError, match=message):
        karmarkar_karp([1, 2, 3, 4], **args)


def test_equal_size_group_count_must_divide() -> None:
    with pytest.raises(BalancingError, match=r"group count \(3 groups of 2, n=6\) to be divisible by .*k=2"):
        karmarkar_karp([1] * 6, 2, equal_size=True, group_ids=[0, 0, 1, 1, 2, 2])
