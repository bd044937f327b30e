"""Up-front rejection of bad requests: every path with its message."""

from __future__ import annotations

import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.coordinator import StepSpec
from rl_coordinator.coordinator._requests import check_edge, check_get


def test_valid_spec_and_per_rank() -> None:
    assert StepSpec(4, 128).per_rank == 32
    assert StepSpec(2, 8, group_aware=True, group_size=4).per_rank == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dp_size": 0, "batch_size": 4}, r"dp_size must be an int >= 1, got 0"),
        ({"dp_size": 2, "batch_size": 0}, r"batch_size must be an int >= 1, got 0"),
        ({"dp_size": 2, "batch_size": 2.0}, r"batch_size must be an int >= 1, got 2.0"),
        ({"dp_size": 4, "batch_size": 6}, r"batch_size=6 cannot be split across dp_size=4 ranks; pass a multiple"),
        ({"dp_size": 2, "batch_size": 4, "balance": 1}, r"balance must be a bool, got 1"),
        ({"dp_size": 2, "batch_size": 4, "keep_batches": "yes"}, r"keep_batches must be a bool, got 'yes'"),
        ({"dp_size": 2, "batch_size": 4, "method": "kk"}, r"unknown method 'kk'.*valid names: karmarkar_karp, lpt"),
        ({"dp_size": 2, "batch_size": 4, "workload": "token"}, r"unknown workload 'token' \(did you mean 'tokens'\?\)"),
        ({"dp_size": 2, "batch_size": 4, "group_size": 2}, r"group_size needs group_aware=True"),
        ({"dp_size": 2, "batch_size": 4, "group_aware": True, "group_size": 0}, r"group_size must be an int >= 1"),
        ({"dp_size": 2, "batch_size": 6, "group_aware": True, "group_size": 4}, r"not a whole number of groups"),
        (
            {"dp_size": 2, "batch_size": 6, "group_aware": True, "group_size": 2},
            r"3 groups of 2 cannot be kept whole on dp_size=2 ranks.*or pass balance=False",
        ),
    ],
)
def test_bad_spec(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        StepSpec(**kwargs)  # type: ignore[arg-type]


def test_groups_that_do_not_divide_ranks_are_fine_without_balancing() -> None:
    assert StepSpec(2, 6, balance=False, group_aware=True, group_size=2).batch_size == 6


@pytest.mark.parametrize(
    ("edge", "step", "rank", "sample_filter", "timeout", "message"),
    [
        ("", 0, 0, None, 1.0, r"edge_key must be a non-empty string"),
        ("e", True, 0, None, 1.0, r"step must be an int >= 0, got True"),
        ("e", 0, -1, None, 1.0, r"dp_rank=-1 is outside dp_size=2; pass a rank in \[0, 1\]"),
        ("e", 0, 2, None, 1.0, r"dp_rank=2 is outside dp_size=2"),
        ("e", 0, 0, 3, 1.0, r"sample_filter must be a callable SampleInfo -> bool or None, got 3"),
        ("e", 0, 0, None, float("inf"), r"timeout_s must be a finite number of seconds > 0, got inf"),
        ("e", 0, 0, None, -1, r"timeout_s must be a finite number of seconds > 0, got -1"),
    ],
)
def test_bad_get(edge: str, step: object, rank: object, sample_filter: object, timeout: object, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        check_get(edge, step, rank, StepSpec(2, 4), sample_filter, timeout)


def test_check_edge_returns_the_key() -> None:
    assert check_edge("rollout->train") == "rollout->train"
    with pytest.raises(CoordinatorInputError, match=r"edge_key must be a non-empty string, got 3"):
        check_edge(3)
