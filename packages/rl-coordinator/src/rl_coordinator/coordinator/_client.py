"""The typed wrapper producers and consumers use: one `ray.put` per batch out, one `ray.get` per share in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import ray

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._requests import (
    DEFAULT_TIMEOUT_S,
    PutRequest,
    ReadRequest,
    RefSelection,
    check_put,
    check_timeout,
)


def fetch_payloads(selection: RefSelection, *, timeout_s: float | None = None) -> list[Any]:
    """The samples of a selection, in its order: one `ray.get` over the distinct refs, then indexing.

    A ref holding a batch is fetched once however many of its samples the selection has; sample i is
    `payload[positions[i]]` (a view for tensors), or the payload itself when its position is None.
    """
    distinct: dict[Any, int] = {}
    for ref in selection.refs:
        distinct.setdefault(ref, len(distinct))
    payloads = ray.get(list(distinct), timeout=timeout_s)
    return [
        payloads[distinct[ref]] if pos is None else payloads[distinct[ref]][pos]
        for ref, pos in zip(selection.refs, selection.positions, strict=True)
    ]


def _batch_length(payload: Any) -> int:
    # A TensorDict is a Mapping too, but one indexed by sample along its batch size.
    keyed = isinstance(payload, Mapping) and not hasattr(payload, "batch_size")
    if keyed or isinstance(payload, (str, bytes)):
        raise CoordinatorInputError(
            f"payload must be indexable by sample (a list, a tensor with samples on dim 0, a TensorDict), got "
            f"{type(payload).__name__}; wrap a dict of tensors in a TensorDict with batch_size=[n]"
        )
    try:
        return len(payload)
    except TypeError:
        raise CoordinatorInputError(
            f"payload must have one entry per sample (len(payload)), got {type(payload).__name__}"
        ) from None


class CoordinatorClient:
    """Typed access to a DataCoordinator actor for a producer or a consumer.

    Args:
        coordinator: the actor handle (`start_coordinator()` or `ray.get_actor(name)`).
        timeout_s: default wait of `get_refs` / `get_batch` for a step's samples.
    """

    def __init__(self, coordinator: Any, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.coordinator = coordinator
        self.timeout_s = check_timeout(timeout_s)

    def put_batch(
        self, edge_key: str, infos: list[SampleInfo], payload: Any, *, wait: bool = True
    ) -> int | ray.ObjectRef:
        """Put a producer's batch: one `ray.put` of the whole payload, then its infos and ref to the coordinator.

        Args:
            edge_key: the edge the batch goes out on.
            infos: one SampleInfo per sample, in payload order.
            payload: the samples, indexable by position: a list, a `(n, ...)` tensor or a TensorDict of batch
                size n, with n = len(infos).
            wait: wait for the coordinator to accept (errors raise here); False returns the acknowledgement's
                ObjectRef for the caller to `ray.get` later, so a producer can keep going.

        Returns:
            the samples pending on the edge after this put, or the acknowledgement ref when wait=False.
        """
        n = _batch_length(payload)
        if isinstance(infos, list) and n != len(infos):
            raise CoordinatorInputError(f"payload has {n} samples but infos has {len(infos)}; pass one info per sample")
        check_put(edge_key, infos, [None] * n, None)  # before the ray.put, so a bad batch stores nothing
        ref = ray.put(payload)
        ack = self.coordinator.put.remote(PutRequest(edge_key, infos, [ref] * n, list(range(n))))
        return ray.get(ack) if wait else ack

    def get_refs(self, request: ReadRequest) -> RefSelection:
        """The requesting rank's share of its step by reference (see ReadRequest); one call to the actor.

        A request without a timeout waits the client's `timeout_s`.
        """
        if not isinstance(request, ReadRequest):
            raise CoordinatorInputError(
                f"request must be a ReadRequest, got {type(request).__name__}; build one with "
                "ReadRequest(edge_key, step, dp_rank, StepSpec(dp_size, batch_size))"
            )
        if request.timeout_s is None:
            request = replace(request, timeout_s=self.timeout_s)
        return ray.get(self.coordinator.get.remote(request))

    def get_batch(self, request: ReadRequest) -> tuple[list[SampleInfo], list[Any]]:
        """The requesting rank's share of its step with its payloads: (infos, samples), samples in info order.

        The payloads come straight from the producers' objects (`fetch_payloads`).
        """
        selection = self.get_refs(request)
        return selection.infos, fetch_payloads(selection)

    def drop(self, edge_key: str, step: int) -> bool:
        """Free a step whose ranks will not all read it; returns whether it was cached (DataCoordinator.drop)."""
        return ray.get(self.coordinator.drop.remote(edge_key, step))

    def drop_before(self, edge_key: str, step: int) -> list[int]:
        """Drop every cached step of an edge below `step`; returns the dropped steps."""
        return ray.get(self.coordinator.drop_before.remote(edge_key, step))

    def metrics(self) -> dict[str, float]:
        """The coordinator's metrics by name."""
        return ray.get(self.coordinator.metrics.remote())
