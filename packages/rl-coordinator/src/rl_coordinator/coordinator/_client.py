"""The typed wrapper producers and consumers use: one `ray.put` per batch out, one `ray.get` per share in."""

from __future__ import annotations

from collections.abc import Mapping
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
    check_get,
    check_put,
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
        self.timeout_s = timeout_s

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
        check_put(edge_key, infos, [None] * n, None)
        ref = ray.put(payload)
        ack = self.coordinator.put.remote(edge_key, infos, [ref] * n, list(range(n)))
        return ray.get(ack) if wait else ack

    def get_refs(
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
        timeout_s: float | None = None,
        wait_for_edge: bool = True,
    ) -> RefSelection:
        """This rank's share of a step by reference; the arguments are DataCoordinator.get's.

        A malformed request raises CoordinatorInputError here, before any call to the actor.
        """
        timeout = self.timeout_s if timeout_s is None else timeout_s
        spec = StepSpec(dp_size, batch_size, balance, group_aware, group_size, method, workload, keep_batches)
        check_get(edge_key, step, dp_rank, spec, sample_filter, timeout)
        call = self.coordinator.get.remote(
            edge_key,
            step,
            dp_rank,
            dp_size,
            batch_size=batch_size,
            balance=balance,
            sample_filter=sample_filter,
            group_aware=group_aware,
            group_size=group_size,
            method=method,
            workload=workload,
            keep_batches=keep_batches,
            timeout_s=timeout,
            wait_for_edge=wait_for_edge,
        )
        return ray.get(call)

    def get_batch(
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
        timeout_s: float | None = None,
        wait_for_edge: bool = True,
    ) -> tuple[list[SampleInfo], list[Any]]:
        """This rank's share of a step with its payloads: (infos, samples), samples in info order.

        Same arguments as `get_refs`; the payloads come straight from the producers' objects.
        """
        selection = self.get_refs(
            edge_key,
            step,
            dp_rank,
            dp_size,
            batch_size=batch_size,
            balance=balance,
            sample_filter=sample_filter,
            group_aware=group_aware,
            group_size=group_size,
            method=method,
            workload=workload,
            keep_batches=keep_batches,
            timeout_s=timeout_s,
            wait_for_edge=wait_for_edge,
        )
        return selection.infos, fetch_payloads(selection)

    def metrics(self) -> dict[str, float]:
        """The coordinator's metrics by name."""
        return ray.get(self.coordinator.metrics.remote())
