"""The local fast path: when producer and consumer share a data-parallel layout, a batch never leaves its worker."""

from __future__ import annotations

from typing import Any

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._requests import check_edge


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


class LocalEdgeStore:
    """Batches a worker keeps for its own next stage, keyed by (edge, step); taking a batch frees it.

    One per worker process; not thread-safe (a worker's stages run one after another).
    """

    def __init__(self) -> None:
        self._batches: dict[tuple[str, int], tuple[list[SampleInfo], Any]] = {}

    def put(self, edge_key: str, step: int, infos: list[SampleInfo], payload: Any) -> None:
        """Keep a batch for (edge, step); a second put for the same key is an error (it would lose data)."""
        check_edge(edge_key)
        if type(step) is not int or step < 0:
            raise CoordinatorInputError(f"step must be an int >= 0, got {step!r}")
        if not isinstance(infos, list) or not all(isinstance(info, SampleInfo) for info in infos):
            raise CoordinatorInputError("infos must be a list of SampleInfo")
        key = (edge_key, step)
        if key in self._batches:
            raise CoordinatorInputError(
                f"a batch for edge {edge_key!r} step {step} is already held; take it before putting another"
            )
        self._batches[key] = (infos, payload)

    def take(self, edge_key: str, step: int) -> tuple[list[SampleInfo], Any]:
        """Remove and return the (infos, payload) kept for (edge, step)."""
        try:
            return self._batches.pop((edge_key, step))
        except KeyError:
            held = ", ".join(f"{e!r} step {s}" for e, s in sorted(self._batches)) or "nothing"
            raise CoordinatorInputError(
                f"no local batch for edge {edge_key!r} step {step} (held: {held}); the producer must put it on this "
                "worker first, or the edge needs the coordinator (see use_local_path)"
            ) from None

    def __contains__(self, key: object) -> bool:
        return key in self._batches

    def __len__(self) -> int:
        return len(self._batches)
