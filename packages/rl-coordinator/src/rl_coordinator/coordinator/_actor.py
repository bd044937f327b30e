"""The DataCoordinator Ray actor: samples move between stages by reference, never through the actor."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import ray

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.coordinator._requests import (
    MAX_SHARES_PER_ITEM,
    PutRequest,
    ReadRequest,
    RefSelection,
    check_max_shares,
    check_steps,
)
from rl_coordinator.coordinator._state import CoordinatorState

DEFAULT_MAX_CONCURRENCY = 1024
"""Concurrent calls the actor accepts. Every rank waiting for a step holds one slot until its samples arrive,
so this bounds the ranks that can wait at once (all consumers of all edges) plus the producers' puts in
flight; the calls are coroutines on one event loop, so a slot costs a little memory, not a thread."""


# Bookkeeping only: it needs no CPU slot. Its calls are not recorded as task events (for Ray's dashboard and
# state API): every rank calls it every step, and recording was a measurable share of each call's CPU here.
# ray.remote's typed overloads omit max_concurrency and enable_task_events (and so lose ActorClass.options).
@ray.remote(num_cpus=0, max_concurrency=DEFAULT_MAX_CONCURRENCY, enable_task_events=False)  # pyright: ignore[reportCallIssue]
class DataCoordinator:
    """Async Ray actor that holds SampleInfo and ObjectRefs per edge and hands each rank its share of a step.

    Producers `ray.put` their payloads themselves and `put` only the infos and refs here (refs inside a list
    are not resolved by Ray, so the payloads never enter this process). A consumer's `get` names the edge, the
    step and its rank; the first rank of a step to arrive takes the step's samples from the edge (in arrival
    order, through an optional filter, optionally whole groups) and partitions them across the ranks; the
    other ranks read the same partition, and the step is freed once every rank has read it. Requests for
    different edges or steps never share a cache entry. A bad request raises CoordinatorInputError in the
    caller and leaves the actor serving everyone else.

    Ray ownership applies to the payloads: an object belongs to the process that put it, so a producer must
    outlive the reads of its samples. A step whose ranks never all read it stays cached until `drop` or
    `drop_before` frees it.

    Every call takes one argument object (PutRequest, ReadRequest): Ray serializes each argument of a call
    on its own, at a fixed cost each, so a dozen keyword arguments cost more than the work they ask for.

    Start it with `start_coordinator()` (or `DataCoordinator.remote()`); use it through `CoordinatorClient`.
    """

    def __init__(self) -> None:
        # The actor's process holds Ray's and torch's objects from import (about 200k): a full collection,
        # which the samples queued here trigger now and then, scanned them all though none is garbage (a
        # stall of a noticeable fraction of a step; bench/README.md). Frozen, they are left out of every collection.
        gc.freeze()
        self._state = CoordinatorState()

    async def put(self, request: PutRequest) -> int:
        """Queue a producer's samples on their edge (see PutRequest); returns how many are pending there."""
        if not isinstance(request, PutRequest):
            raise CoordinatorInputError(
                f"put takes a PutRequest, got {type(request).__name__}; build one with "
                "PutRequest(edge_key, infos, refs, positions) or use CoordinatorClient.put_batch"
            )
        return self._state.put(request.edge_key, request.infos, request.refs, request.positions)

    async def put_many(self, requests: list[PutRequest]) -> list[int | CoordinatorInputError]:
        """Queue several PutRequests in order, each on its own (what a client's coalesced put sends).

        Returns per request the pending count of its edge after it, or the CoordinatorInputError that refused
        it; a refused request leaves the others queued.
        """
        if not isinstance(requests, list):
            raise CoordinatorInputError(f"put_many takes a list of PutRequest, got {type(requests).__name__}")
        outcomes: list[int | CoordinatorInputError] = []
        for request in requests:
            try:
                outcomes.append(await self.put(request))
            except CoordinatorInputError as exc:
                outcomes.append(exc)
        return outcomes

    async def get(self, request: ReadRequest) -> RefSelection:
        """The requesting rank's share of its step, by reference (see ReadRequest).

        The first rank of a step partitions it; the others read that partition; the step is freed once every
        rank has read it. Waits up to the request's timeout (DEFAULT_TIMEOUT_S when None) for the samples.
        """
        return await self._state.get(request)

    async def stream(
        self, request: ReadRequest, steps: int | None = None, max_shares_per_item: int = MAX_SHARES_PER_ITEM
    ) -> AsyncIterator[list[RefSelection]]:
        """The requesting rank's shares of `steps` consecutive steps from `request.step` (endless when None).

        A streaming call (iterate the ObjectRefGenerator `.remote()` returns; `CoordinatorClient.stream_refs`
        wraps it): each item is a list of consecutive shares, sent as soon as its first step is partitioned,
        with the following steps that can be read at once (`max_shares_per_item` shares at most). Every step is
        read as `get` reads it (the same partition across ranks, freed once every rank has read it), in order;
        the wait for a step (the request's timeout) starts when the previous item was sent. Cancelling the call
        releases the rank's claim on the step it waits for.
        """
        if not isinstance(request, ReadRequest):
            raise CoordinatorInputError(f"stream takes a ReadRequest, got {type(request).__name__}")
        check_steps(steps)
        check_max_shares(max_shares_per_item)
        end = None if steps is None else request.step + steps
        step = request.step
        while end is None or step < end:
            shares = [await self._state.get(replace(request, step=step))]
            step += 1
            while len(shares) < max_shares_per_item and (end is None or step < end):
                share = self._state.read_ready(replace(request, step=step))
                if share is None:
                    break
                shares.append(share)
                step += 1
            yield shares

    async def drop(self, edge_key: str, step: int) -> bool:
        """Free a step whose ranks will not all read it; returns whether it was cached (CoordinatorState.drop)."""
        return self._state.drop(edge_key, step)

    async def drop_before(self, edge_key: str, step: int) -> list[int]:
        """Drop every cached step of an edge below `step`; returns the dropped steps."""
        return self._state.drop_before(edge_key, step)

    async def metrics(self) -> dict[str, float]:
        """The coordinator metrics by name (`coordinator/put_samples`, `coordinator/get_wait_s`, ...)."""
        return self._state.metrics_dict()

    async def pending(self, edge_key: str | None = None) -> int:
        """Samples put and not yet taken by a step, on one edge or on all."""
        return self._state.pending(edge_key)

    async def cached_steps(self) -> list[tuple[str, int]]:
        """(edge, step) keys the actor still holds: waiting, or not yet read by every rank."""
        return self._state.cached_steps()


def start_coordinator(
    *, name: str | None = None, namespace: str | None = None, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
) -> Any:
    """Start a DataCoordinator actor (Ray must be initialised) and return its handle.

    Args:
        name: register the actor under this name so other processes can `ray.get_actor` it.
        namespace: Ray namespace of the name.
        max_concurrency: concurrent calls accepted (see DEFAULT_MAX_CONCURRENCY).
    """
    if type(max_concurrency) is not int or max_concurrency < 1:
        raise CoordinatorInputError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    options: dict[str, Any] = {"max_concurrency": max_concurrency}
    if name is not None:
        options.update(name=name, namespace=namespace)
    return DataCoordinator.options(**options).remote()  # pyright: ignore[reportAttributeAccessIssue]  # see @ray.remote
