"""The local fast path: when it applies (the runtime's executor keeps such batches, see rl-runtime's
tests/workers/test_local_edges.py)."""

from __future__ import annotations

import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.coordinator import use_local_path


@pytest.mark.parametrize(
    ("producer", "consumer", "balance", "expected"),
    [(4, 4, False, True), (4, 4, True, False), (4, 2, False, False), (1, 8, False, False), (1, 1, False, True)],
)
def test_use_local_path(producer: int, consumer: int, balance: bool, expected: bool) -> None:
    assert use_local_path(producer, consumer, balance=balance) is expected


@pytest.mark.parametrize(
    ("producer", "consumer", "balance", "message"),
    [
        (0, 4, False, r"producer_dp_size must be an int >= 1, got 0"),
        (4, 2.0, False, r"consumer_dp_size must be an int >= 1, got 2.0"),
        (4, 4, None, r"balance must be a bool, got None"),
    ],
)
def test_use_local_path_rejects(producer: object, consumer: object, balance: object, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        use_local_path(producer, consumer, balance=balance)  # type: ignore[arg-type]
