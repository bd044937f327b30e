"""The typed wrapper producers and consumers use: coalesced puts out, shares in by a call each or a stream."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import ray

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._bundle import encode_batch
from rl_coordinator.coordinator._fetch import fetch_payloads
from rl_coordinator.coordinator._requests import (
    DEFAULT_TIMEOUT_S,
    MAX_SHARES_PER_ITEM,
    ReadRequest,
    RefSelection,
    check_put,
    check_read_request,
    check_timeout,
)
from rl_coordinator.coordinator._sender import DEFAULT_MAX_BUNDLE_BYTES, PutSender
from rl_coordinator.coordinator._stream import ShareStream


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

    Puts are coalesced: a batch goes out at once when no earlier put of this client is unacknowledged, and
    the batches put meanwhile go out together as one call (each edge's payloads in as few `ray.put`s as
    `max_bundle_bytes` allows) when it is. A producer that puts with `wait=False` calls `flush()` before it
    relies on its samples being on the coordinator (before exiting, say). A put snapshots its tensors into the
    client's staging ring (two bundles of memory, at most 64 MiB, touched as used and kept), so keep one client
    per producer rather than one per put. Every share read and put allocates a few Python objects per sample; in a
    process holding Ray's and torch's ~200k objects, each full garbage collection they trigger rescans all of
    those (a stall long enough to show in a step's timings; bench/README.md has the figure), so a long-running
    producer or consumer calls `gc.freeze()` once set up, as the coordinator actor does.

    Args:
        coordinator: the actor handle (`start_coordinator()` or `ray.get_actor(name)`).
        timeout_s: default wait of `get_refs` / `get_batch` for a step's samples.
        max_bundle_bytes: payload bytes per `ray.put` when batches are coalesced; a consumer fetches a whole
            object to read any sample of it, so this bounds what a rank pulls for a few samples.
    """

    def __init__(
        self,
        coordinator: Any,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bundle_bytes: int = DEFAULT_MAX_BUNDLE_BYTES,
    ) -> None:
        if type(max_bundle_bytes) is not int or max_bundle_bytes < 1:
            raise CoordinatorInputError(f"max_bundle_bytes must be an int >= 1, got {max_bundle_bytes!r}")
        self.coordinator = coordinator
        self.timeout_s = check_timeout(timeout_s)
        self.max_bundle_bytes = max_bundle_bytes
        self._sender = PutSender(coordinator, max_bundle_bytes)

    def __reduce__(self) -> tuple[Any, ...]:
        # The sender's queue and thread stay with this process; a copy elsewhere starts its own.
        return _rebuild_client, (self.coordinator, self.timeout_s, self.max_bundle_bytes)

    def put_batch(self, edge_key: str, infos: list[SampleInfo], payload: Any, *, wait: bool = True) -> int | Future:
        """Put a producer's batch: its payload to the object store, its infos and ref to the coordinator.

        The payload is copied before this returns, so the caller may reuse its tensors at once.

        Args:
            edge_key: the edge the batch goes out on.
            infos: one SampleInfo per sample, in payload order.
            payload: the samples, indexable by position: a list, a `(n, ...)` tensor or a TensorDict of batch
                size n, with n = len(infos).
            wait: wait for the coordinator to accept (errors raise here); False returns a Future of the same
                result (its `result()` raises a refusal), so a producer can keep going; cancelling the Future
                before its batch is sent keeps the batch from being sent.

        Returns:
            the samples pending on the edge after this put, or its Future when wait=False.
        """
        n = _batch_length(payload)
        if isinstance(infos, list) and n != len(infos):
            raise CoordinatorInputError(f"payload has {n} samples but infos has {len(infos)}; pass one info per sample")
        check_put(edge_key, infos, [None] * n, None)  # before anything is queued, so a bad batch stores nothing
        done = self._sender.submit(edge_key, infos, encode_batch(payload, n, self._sender.arena))
        return done.result() if wait else done

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every batch this client has put is acknowledged; refusals stay on their Futures.

        Raises TimeoutError when `timeout_s` passes first.
        """
        self._sender.flush(timeout_s)

    def get_refs(self, request: ReadRequest) -> RefSelection:
        """The requesting rank's share of its step by reference (see ReadRequest); one call to the actor.

        A request without a timeout waits the client's `timeout_s`.
        """
        return ray.get(self.coordinator.get.remote(self._with_default_timeout(check_read_request(request))))

    def stream_refs(
        self, request: ReadRequest, steps: int | None = None, *, max_shares_per_item: int = MAX_SHARES_PER_ITEM
    ) -> ShareStream:
        """The requesting rank's shares of `steps` consecutive steps from `request.step` (None: until closed).

        One streaming call to the actor in place of a `get_refs` call per step: the coordinator sends each
        share as soon as its step is partitioned, with the next ones already partitioned, up to
        `max_shares_per_item` in one item (see ShareStream; close it to stop early). Each step's wait runs from
        the previous item's sending; a request without a timeout waits the client's `timeout_s`.
        """
        request = self._with_default_timeout(check_read_request(request))
        return ShareStream(self.coordinator, request, steps, max_shares_per_item)

    def _with_default_timeout(self, request: ReadRequest) -> ReadRequest:
        return request if request.timeout_s is not None else replace(request, timeout_s=self.timeout_s)

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


def _rebuild_client(coordinator: Any, timeout_s: float, max_bundle_bytes: int) -> CoordinatorClient:
    return CoordinatorClient(coordinator, timeout_s=timeout_s, max_bundle_bytes=max_bundle_bytes)
