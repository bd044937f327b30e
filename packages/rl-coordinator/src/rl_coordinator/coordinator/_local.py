"""The local fast path: when producer and consumer share a data-parallel layout, a batch never leaves its worker
(the runtime's executor keeps it; the coordinator is not involved)."""

from __future__ import annotations

from rl_coordinator._errors import CoordinatorInputError


def _check_dp_size(name: str, value: object) -> int:
    if type(value) is not int or value < 1:
        raise CoordinatorInputError(f"{name} must be an int >= 1, got {value!r}")
    return value


def use_local_path(producer_dp_size: int, consumer_dp_size: int, *, balance: bool) -> bool:
    """Whether a consumer rank can take its producer rank's batch as is, without the coordinator.

    True when both stages have the same number of data-parallel ranks (rank r feeds rank r) and the consumer
    does not ask for balancing, which would move samples between ranks. Otherwise the batch goes through the
    DataCoordinator.
    """
    _check_dp_size("producer_dp_size", producer_dp_size)
    _check_dp_size("consumer_dp_size", consumer_dp_size)
    if type(balance) is not bool:
        raise CoordinatorInputError(f"balance must be a bool, got {balance!r}")
    return producer_dp_size == consumer_dp_size and not balance
