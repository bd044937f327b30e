"""The DataCoordinator Ray actor: samples move between stages by reference, never through the actor."""

from __future__ import annotations

from typing import Any

import ray

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._requests import (
    DEFAULT_METHOD,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WORKLOAD,
    RefSelection,
    SampleFilter,
    StepSpec,
)
from rl_coordinator.coordinator._state import CoordinatorState

DEFAULT_MAX_CONCURRENCY = 1024
"""Concurrent calls the actor accepts. Every rank waiting for a step holds one slot until its samples arrive,
so this bounds the ranks that can wait at once (all consumers of all edges) plus the producers' puts in
flight; the calls are coroutines on one event loop, so a slot costs a little memory, not a thread."""


@ray.remote(num_cpus=0, max_concurrency=DEFAULT_MAX_CONCURRENCY)  # bookkeeping only: it needs no CPU slot
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
    outlive the reads of its samples. A step whose ranks never all read it stays cached.

    Start it with `start_coordinator()` (or `DataCoordinator.remote()`); use it through `CoordinatorClient`.
    """

    def __init__(self) -> None:
        self._state = CoordinatorState()

    async def put(
        self, edge_key: str, infos: list[SampleInfo], refs: list[ray.ObjectRef], positions: list[int] | None = None
    ) -> int:
        """Queue samples on an edge; returns how many samples are pending there.

        Args:
            edge_key: the pipeline edge, e.g. "rollout->actor_update".
            infos: one SampleInfo per sample; uids unique among the edge's pending samples.
            refs: one ObjectRef per sample, inside this list (so Ray passes the refs, not the values); samples
                put in one `ray.put` share the same ref.
            positions: each sample's index inside its ref's payload, or None when each ref is one sample.
        """
        bad = (
            next((i for i, ref in enumerate(refs) if not isinstance(ref, ray.ObjectRef)), None)
            if isinstance(refs, list)
            else None
        )
        if bad is not None:
            raise CoordinatorInputError(f"refs[{bad}] must be a ray.ObjectRef, got {type(refs[bad]).__name__}")
        return self._state.put(edge_key, infos, refs, positions)

    async def get(
        self,
        edge_key: str,
        step: int,
        dp_rank: int,
        dp_size: int,
        *,
        batch_size: int,
        balance: bool = True,
        sample_filter: SampleFilter | None = None,
        group_aware: bool = False,
        group_size: int | None = None,
        method: str = DEFAULT_METHOD,
        workload: str = DEFAULT_WORKLOAD,
        keep_batches: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        wait_for_edge: bool = True,
    ) -> RefSelection:
        """Rank `dp_rank`'s share of step `step` on an edge, by reference.

        Args:
            edge_key: the edge to read.
            step: the consumer's step, an int >= 0; each (edge, step) is served once.
            dp_rank: this rank, in [0, dp_size).
            dp_size: consumer ranks; each receives batch_size / dp_size samples.
            batch_size: samples in the whole step, across ranks.
            balance: split by balanced workload (`method`, `workload`) instead of contiguously.
            sample_filter: picklable predicate over SampleInfo; rejected samples (groups) are dropped.
            group_aware: take whole groups only and keep a group on one rank when balancing.
            group_size: with group_aware, the size of a complete group (None: a group is what is pending).
            method: partition method name (balancing.PARTITION_METHODS).
            workload: workload name (balancing.WORKLOADS).
            keep_batches: balance whole producer batches when they divide evenly (see StepSpec).
            timeout_s: how long to wait for the samples before raising CoordinatorTimeout.
            wait_for_edge: wait for an edge never put yet (False: raise CoordinatorInputError at once).
        """
        spec = StepSpec(dp_size, batch_size, balance, group_aware, group_size, method, workload, keep_batches)
        return await self._state.get(edge_key, step, dp_rank, spec, sample_filter, timeout_s, wait_for_edge)

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
    return DataCoordinator.options(**options).remote()
