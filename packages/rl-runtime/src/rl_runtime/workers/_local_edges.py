"""The batches a worker keeps for its own next node.

An edge whose producer and consumer have the same data-parallel layout and no balancing
(`rl_coordinator.coordinator.use_local_path`, decided when the routes are planned) never leaves the worker: the
executor keeps the producer's `StepData` here until the consumer takes it in the same step. Nothing is moved
between ranks, so the coordinator is not involved; this is the executor's own bookkeeping.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from rl_runtime.workers._errors import RoutingError

Payload = TypeVar("Payload")


class LocalEdges(Generic[Payload]):
    """Batches kept for this worker's own next node, keyed by (edge, step); taking a batch frees it.

    One per executor; not thread-safe (a worker's nodes run one after another).
    """

    def __init__(self) -> None:
        self._batches: dict[tuple[str, int], Payload] = {}

    def put(self, edge_key: str, step: int, batch: Payload) -> None:
        """Keep `batch` for (edge, step); a second put for the same key is an error (it would lose data)."""
        if not isinstance(edge_key, str) or not edge_key:
            raise RoutingError(f"edge_key must be a non-empty string, got {edge_key!r}")
        if type(step) is not int or step < 0:
            raise RoutingError(f"step must be an int >= 0, got {step!r}")
        key = (edge_key, step)
        if key in self._batches:
            raise RoutingError(
                f"a batch for edge {edge_key!r} step {step} is already held; take it before putting another"
            )
        self._batches[key] = batch

    def take(self, edge_key: str, step: int) -> Payload:
        """Remove and return the batch kept for (edge, step)."""
        try:
            return self._batches.pop((edge_key, step))
        except KeyError:
            held = ", ".join(f"{e!r} step {s}" for e, s in sorted(self._batches)) or "nothing"
            raise RoutingError(
                f"no local batch for edge {edge_key!r} step {step} (held: {held}); the producer must put it on this "
                "worker first, or the edge needs the coordinator (see rl_coordinator.coordinator.use_local_path)"
            ) from None

    def __contains__(self, key: object) -> bool:
        return key in self._batches

    def __len__(self) -> int:
        return len(self._batches)
