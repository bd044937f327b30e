"""The coordinator's bookkeeping, free of Ray: pending samples per edge and one cache entry per (edge, step).

Everything runs on one asyncio event loop (the actor's), and no method awaits between reading and writing
the state, so no lock is needed: a put, a partition and a read each happen in one uninterrupted stretch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rl_coordinator._errors import CoordinatorInputError, CoordinatorTimeout
from rl_coordinator._sample_info import SampleInfo, pack_infos
from rl_coordinator.coordinator._metrics import CoordinatorMetrics
from rl_coordinator.coordinator._requests import (
    ReadRequest,
    RefSelection,
    SampleFilter,
    StepSpec,
    check_edge,
    check_put,
    check_step,
)
from rl_coordinator.coordinator._selection import (
    PendingSample,
    count_selectable,
    remove_picked,
    select,
    split_across_ranks,
)
from rl_core import nearest_name

logger = logging.getLogger(__name__)

_COMPLETED_STEPS_KEPT = 4096
"""Freed steps remembered per edge, so a late get of a freed step is an error rather than silently taking the
next samples; bounded so a long run does not grow the set forever."""


@dataclass
class _Edge:
    queue: list[PendingSample] = field(default_factory=list)
    uids: set[str] = field(default_factory=set)
    completed: OrderedDict[int, str] = field(default_factory=OrderedDict)  # freed step -> how it was freed


@dataclass(eq=False)
class _StepEntry:
    spec: StepSpec
    sample_filter: SampleFilter | None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    claimed: set[int] = field(default_factory=set)  # ranks that asked, waiting or done
    read: set[int] = field(default_factory=set)
    waiting: int = 0
    samples: list[PendingSample] | None = None
    parts: list[list[int]] | None = None
    error: str | None = None


def _first_duplicate(uids: list[str], pending: set[str]) -> str:
    seen: set[str] = set()
    for uid in uids:
        if uid in seen or uid in pending:
            return uid
        seen.add(uid)
    raise AssertionError("no duplicate uid")  # only called when there is one


class CoordinatorState:
    """Pending samples per edge and the partition of each requested (edge, step); see DataCoordinator."""

    def __init__(self) -> None:
        self._edges: dict[str, _Edge] = {}
        self._steps: dict[tuple[str, int], _StepEntry] = {}
        self.metrics = CoordinatorMetrics()

    def put(self, edge_key: str, infos: list[SampleInfo], refs: list[Any], positions: list[int] | None = None) -> int:
        """Queue samples on an edge and serve any step they complete; returns the edge's pending count."""
        n = check_put(edge_key, infos, refs, positions)
        edge = self._edges.setdefault(edge_key, _Edge())
        uids = [info.uid for info in infos]
        if len(set(uids)) != n or not edge.uids.isdisjoint(uids):
            raise CoordinatorInputError(
                f"uid {_first_duplicate(uids, edge.uids)!r} is put twice or already pending on edge {edge_key!r}; "
                "uids must be unique"
            )
        edge.uids.update(uids)
        where = positions if positions is not None else [None] * n
        edge.queue.extend(map(PendingSample, infos, refs, where))
        self.metrics.count_put(n, lambda: (edge_key, pack_infos(infos), refs, positions))  # as PutRequest sends
        self._serve(edge_key)
        return len(edge.queue)

    async def get(self, request: ReadRequest) -> RefSelection:
        """The requesting rank's share of its step, waiting up to the request's timeout for the samples."""
        if not isinstance(request, ReadRequest):
            raise CoordinatorInputError(
                f"get takes a ReadRequest, got {type(request).__name__}; build one with "
                "ReadRequest(edge_key, step, dp_rank, StepSpec(dp_size, batch_size))"
            )
        edge_key, dp_rank = request.edge_key, request.dp_rank
        if edge_key not in self._edges and not request.wait_for_edge:
            raise CoordinatorInputError(self._unknown_edge(edge_key, "wait_for_edge=False"))
        key = request.key
        entry = self._steps.get(key)
        refusal = self._refusal(request, entry)
        if refusal is not None:
            raise CoordinatorInputError(refusal)
        if entry is None:
            entry = self._steps[key] = _StepEntry(request.spec, request.sample_filter)
            self._serve(edge_key)
        entry.claimed.add(dp_rank)
        waited = 0.0
        if not entry.ready.is_set():
            waited = await self._wait(key, entry, dp_rank, request.wait_s())
        if entry.error is not None:
            raise CoordinatorInputError(entry.error)
        return self._read(key, entry, dp_rank, waited)

    def read_ready(self, request: ReadRequest) -> RefSelection | None:
        """The rank's share of the request's step if it can be read now without waiting, else None.

        None leaves nothing behind (no claim, no open step) and is also the answer to a request `get` would
        refuse, so that the `get` which follows raises the error. A step the pending samples fill is partitioned
        here, as `get` would.
        """
        key = request.key
        entry = self._steps.get(key)
        if request.edge_key not in self._edges or self._refusal(request, entry) is not None:
            return None
        if entry is None:
            entry = self._steps[key] = _StepEntry(request.spec, request.sample_filter)
            self._serve(request.edge_key)
            if not entry.ready.is_set():
                del self._steps[key]
                return None
        if entry.error is not None or not entry.ready.is_set():
            return None
        entry.claimed.add(request.dp_rank)
        return self._read(key, entry, request.dp_rank, 0.0)

    def _refusal(self, request: ReadRequest, entry: _StepEntry | None) -> str | None:
        """Why a read of the request's step is refused (the step was freed, it was opened with another spec, or
        the rank asked for it before), or None; `entry` is the step's cache entry, if any."""
        edge_key, step, dp_rank = request.edge_key, request.step, request.dp_rank
        edge = self._edges.get(edge_key)
        if edge is not None and step in edge.completed:
            how = edge.completed[step]
            return f"step {step} of edge {edge_key!r} was already {how} and freed; ask for the next step"
        if entry is not None and entry.spec != request.spec:
            return (
                f"rank {dp_rank} asked step {step} of edge {edge_key!r} with {request.spec}, but the step was opened "
                f"with {entry.spec}; every rank of a step must send the same request"
            )
        if entry is not None and dp_rank in entry.claimed:
            return f"rank {dp_rank} already asked for step {step} of edge {edge_key!r}"
        return None

    def drop(self, edge_key: str, step: int) -> bool:
        """Free step `step` of an edge, read or not; returns whether the step was cached.

        Ranks still waiting for it fail with CoordinatorInputError; samples it took that some rank has not
        read are discarded (counted in `coordinator/dropped_samples`) and their refs released; a later get of
        the step fails. A step nobody has asked for is not cached, so there is nothing to drop.
        """
        check_edge(edge_key)
        check_step(step)
        entry = self._steps.pop((edge_key, step), None)
        if entry is None:
            return False
        if entry.parts is None:
            message = f"step {step} of edge {edge_key!r} was dropped while {entry.waiting} rank(s) waited for it"
            entry.error = message
            entry.ready.set()
        else:
            unread = sum(len(part) for rank, part in enumerate(entry.parts) if rank not in entry.read)
            self.metrics.dropped_samples += unread
            logger.info("edge %r step %d dropped with %d sample(s) unread", edge_key, step, unread)
        self._complete((edge_key, step), "dropped")
        self._serve(edge_key)  # later steps may take the samples a dropped waiting step would have taken
        return True

    def drop_before(self, edge_key: str, step: int) -> list[int]:
        """Drop every cached step of an edge below `step` (see `drop`); returns the dropped steps in order."""
        check_edge(edge_key)
        check_step(step)
        earlier = sorted(s for name, s in self._steps if name == edge_key and s < step)
        for old in earlier:
            self.drop(edge_key, old)
        return earlier

    async def _wait(self, key: tuple[str, int], entry: _StepEntry, dp_rank: int, timeout_s: float) -> float:
        entry.waiting += 1
        start = time.monotonic()
        try:
            await asyncio.wait_for(entry.ready.wait(), timeout_s)
        except asyncio.TimeoutError:
            # The samples may have arrived just as the timeout fired; then the rank takes its share after all.
            if not entry.ready.is_set():
                if key[0] not in self._edges:
                    raise CoordinatorInputError(self._unknown_edge(key[0], f"after waiting {timeout_s:g}s")) from None
                raise CoordinatorTimeout(self._shortfall(key, entry, timeout_s)) from None
        finally:
            entry.waiting -= 1
            if not entry.ready.is_set():
                entry.claimed.discard(dp_rank)
                # Nobody is waiting and no sample was taken: drop the entry so a retry starts clean and later
                # steps are not held behind it.
                if entry.waiting == 0 and self._steps.get(key) is entry:
                    del self._steps[key]
                    self._serve(key[0])
        return time.monotonic() - start

    def _read(self, key: tuple[str, int], entry: _StepEntry, dp_rank: int, waited: float) -> RefSelection:
        assert entry.samples is not None and entry.parts is not None
        mine = [entry.samples[i] for i in entry.parts[dp_rank]]
        entry.read.add(dp_rank)
        if len(entry.read) == entry.spec.dp_size:
            del self._steps[key]
            self._complete(key, f"read by all {entry.spec.dp_size} ranks")
        selection = RefSelection([s.info for s in mine], [s.ref for s in mine], [s.position for s in mine])
        self.metrics.count_get(len(mine), waited, selection)
        return selection

    def _complete(self, key: tuple[str, int], how: str) -> None:
        """Remember a freed step (and how it was freed) so a late get of it is an error rather than new samples."""
        edge = self._edges.get(key[0])
        if edge is None:  # ranks waited on an edge never put; there are no samples a late get could take
            return
        completed = edge.completed
        completed[key[1]] = how
        if len(completed) > _COMPLETED_STEPS_KEPT:
            completed.popitem(last=False)

    def _serve(self, edge_key: str) -> None:
        """Give pending samples to the open steps of an edge, lowest step first, as far as they go."""
        edge = self._edges.get(edge_key)
        if edge is None:
            return
        open_steps = sorted(
            (
                (step, entry)
                for (name, step), entry in self._steps.items()
                if name == edge_key and not entry.ready.is_set()
            ),
            key=lambda pair: pair[0],
        )
        for step, entry in open_steps:
            try:
                pick = select(edge.queue, entry.spec, entry.sample_filter)
            except Exception as exc:  # the filter is user code; its failure must not stop the actor
                self._fail((edge_key, step), entry, f"sample_filter raised {exc!r} on edge {edge_key!r} step {step}")
                continue
            if pick is None:
                return
            samples = [edge.queue[i] for i in pick.taken]
            try:
                parts = split_across_ranks([s.info for s in samples], entry.spec, [s.ref for s in samples])
            except CoordinatorInputError as exc:
                self._fail((edge_key, step), entry, f"cannot split step {step} of edge {edge_key!r}: {exc}")
                continue
            edge.uids.difference_update(s.info.uid for s in remove_picked(edge.queue, pick))
            self.metrics.filtered_samples += len(pick.dropped)
            entry.samples, entry.parts = samples, parts
            entry.ready.set()
            logger.debug("edge %r step %d: took %d, dropped %d", edge_key, step, len(samples), len(pick.dropped))

    def _fail(self, key: tuple[str, int], entry: _StepEntry, message: str) -> None:
        logger.warning("%s", message)
        entry.error = message
        entry.ready.set()
        del self._steps[key]

    def _unknown_edge(self, edge_key: str, when: str) -> str:
        near = nearest_name(edge_key, sorted(self._edges))
        hint = f" (did you mean {near!r}?)" if near else ""
        known = ", ".join(repr(e) for e in sorted(self._edges)) or "none"
        return f"edge {edge_key!r} was never put ({when}){hint}; known edges: {known}"

    def _shortfall(self, key: tuple[str, int], entry: _StepEntry, timeout_s: float) -> str:
        edge_key, step = key
        queue = self._edges[edge_key].queue
        try:
            selectable = f"{count_selectable(queue, entry.spec, entry.sample_filter)} selectable"
        except Exception as exc:  # the filter is user code
            selectable = f"selectable unknown, sample_filter raised {exc!r}"
        earlier = sum(1 for (name, s), e in self._steps.items() if name == edge_key and s < step and e.parts is None)
        ahead = f"; {earlier} earlier step(s) of this edge are still waiting and go first" if earlier else ""
        return (
            f"timed out after {timeout_s:g}s waiting for edge {edge_key!r} step {step}: expected "
            f"{entry.spec.batch_size} samples, present {len(queue)} ({selectable}){ahead}"
        )

    def pending(self, edge_key: str | None = None) -> int:
        """Samples put and not yet taken, on one edge or on all."""
        if edge_key is not None:
            edge = self._edges.get(edge_key)
            return len(edge.queue) if edge is not None else 0
        return sum(len(edge.queue) for edge in self._edges.values())

    def cached_steps(self) -> list[tuple[str, int]]:
        """(edge, step) keys still held: waiting for samples, or partitioned and not read by every rank."""
        return sorted(self._steps)

    def metrics_dict(self) -> dict[str, float]:
        """The metrics by name (see `_metrics`)."""
        return self.metrics.as_dict(self.pending(), len(self._steps))
