"""A producer's puts, coalesced: batches that queue while a send is unacknowledged go out together.

Each `ray.put` and each call to the coordinator costs a fixed round trip of CPU whatever it carries
(bench/README.md, "Figures behind the docstrings"), and that, not the bytes, bounded a producer putting small
batches. The sender
thread sends whatever has queued as one call carrying a PutRequest per batch, with the payloads of each
edge's batches in as few `ray.put`s as the bundle size allows, then waits for the acknowledgement; batches put
meanwhile queue for the next send. A lone batch goes out at once (nothing waits for company), so coalescing
adds no latency when puts are sparse and cuts the round trips to one per send when they are not.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, NamedTuple

import ray

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._bundle import EncodedBatch, PayloadBundle
from rl_coordinator.coordinator._requests import PutRequest
from rl_coordinator.coordinator._staging import StagingArena

logger = logging.getLogger(__name__)

DEFAULT_MAX_BUNDLE_BYTES = 4 << 20
"""Payload bytes per `ray.put` of a send. A consumer fetches a whole object to read any sample of it, so a cap
keeps a rank from pulling many megabytes for a few samples when ranks are on other machines; a batch larger
than the cap is put alone."""
ARENA_BUNDLES = 2
"""The staging arena holds this many full bundles: the one being put and the batches queuing meanwhile."""
MAX_ARENA_BYTES = 64 << 20
"""The staging arena is never larger than this, whatever the bundle cap: the batches beyond it take fresh memory."""
IDLE_EXIT_S = 2.0
"""The sender thread ends after this long without a batch (the next put starts another), so clients that are
dropped leave no thread behind."""


class _Queued(NamedTuple):
    edge_key: str
    infos: list[SampleInfo]
    batch: EncodedBatch
    done: Future


def bundle_groups(batches: list[EncodedBatch], max_bytes: int) -> list[list[int]]:
    """Consecutive batch indices per `ray.put`: each group under `max_bytes`, or one batch that alone exceeds it."""
    groups: list[list[int]] = []
    size = 0
    for i, batch in enumerate(batches):
        nbytes = batch.nbytes
        if not groups or size + nbytes > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += nbytes
    return groups


class PutSender:
    """Sends queued batches to a DataCoordinator from one background thread (see the module docstring).

    Batches are snapshotted into `arena` (ARENA_BUNDLES bundles of memory, at most MAX_ARENA_BYTES, kept for the
    sender's life), which the sender gives back as each bundle is put.

    Args:
        coordinator: the DataCoordinator actor handle.
        max_bundle_bytes: payload bytes per `ray.put` (DEFAULT_MAX_BUNDLE_BYTES).
    """

    def __init__(self, coordinator: Any, max_bundle_bytes: int = DEFAULT_MAX_BUNDLE_BYTES) -> None:
        self._coordinator = coordinator
        self._max_bundle_bytes = max_bundle_bytes
        self.arena = StagingArena(min(ARENA_BUNDLES * max_bundle_bytes, MAX_ARENA_BYTES))
        self._queue: deque[_Queued] = deque()
        self._unacknowledged = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, edge_key: str, infos: list[SampleInfo], batch: EncodedBatch) -> Future:
        """Queue one checked batch; the future resolves to the samples pending on its edge, or to its error."""
        done: Future = Future()
        with self._changed:
            self._queue.append(_Queued(edge_key, infos, batch, done))
            self._unacknowledged += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="coordinator-put-sender", daemon=True)
                self._thread.start()
            self._changed.notify_all()
        return done

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every batch submitted so far is acknowledged (accepted or refused)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._unacknowledged == 0, timeout_s):
                raise TimeoutError(f"{self._unacknowledged} put(s) still unacknowledged after {timeout_s:g}s")

    def _bundles(self, queued: list[_Queued]) -> list[list[_Queued]]:
        """The send's batches per `ray.put`: an edge's batches apart from other edges' (a consumer reads whole
        objects, and those of one edge only), in order, under the byte cap."""
        by_edge: dict[str, list[_Queued]] = {}
        for item in queued:
            by_edge.setdefault(item.edge_key, []).append(item)
        return [
            [items[i] for i in group]
            for items in by_edge.values()
            for group in bundle_groups([item.batch for item in items], self._max_bundle_bytes)
        ]

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._changed.wait_for(lambda: bool(self._queue), IDLE_EXIT_S):
                    self._thread = None
                    return
                drained = list(self._queue)
                self._queue.clear()
            # A put cancelled (Future.cancel) before its send is dropped; after this it can no longer be.
            queued = [item for item in drained if item.done.set_running_or_notify_cancel()]
            try:
                self._send(queued)
            except Exception as exc:  # a failure of the sender itself must not leave waiters hanging
                logger.exception("coordinator put sender failed")
                for item in queued:
                    if not item.done.done():
                        item.done.set_exception(exc)
            self.arena.release([slot for item in drained for slot in item.batch.staged])
            with self._changed:
                self._unacknowledged -= len(drained)
                self._changed.notify_all()

    def _send(self, queued: list[_Queued]) -> None:
        requests: list[PutRequest] = []
        sent: list[_Queued] = []
        for group in self._bundles(queued):
            try:
                ref = ray.put(PayloadBundle.of([item.batch for item in group]))
            except Exception as exc:  # the object store refused (full, shut down): these batches fail alone
                for item in group:
                    item.done.set_exception(exc)
                continue
            finally:  # the bundle is in the object store (or will not be): its snapshots' memory is free
                self.arena.release([slot for item in group for slot in item.batch.staged])
            start = 0
            for item in group:
                n = item.batch.length
                requests.append(PutRequest(item.edge_key, item.infos, [ref] * n, list(range(start, start + n))))
                sent.append(item)
                start += n
        if not requests:
            return
        try:
            outcomes = ray.get(self._coordinator.put_many.remote(requests))
        except Exception as exc:  # the actor is gone or the call failed as a whole
            logger.warning("a coordinator put of %d batch(es) failed: %r", len(sent), exc)
            for item in sent:
                item.done.set_exception(exc)
            return
        for item, outcome in zip(sent, outcomes, strict=True):
            if isinstance(outcome, CoordinatorInputError):
                item.done.set_exception(outcome)
            else:
                item.done.set_result(outcome)
