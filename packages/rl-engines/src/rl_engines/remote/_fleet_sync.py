"""`FleetWeightSync`: weight updates into a `ServerFleet`'s servers, each on its own, dropping a server that dies.

A fleet is synced server by server: each server has its own `WeightSync` over its own transport (its shared-memory
buffers, its broadcast group, its disk folder), verified on its own, and run on its own thread. The trainer's
buckets are exported once and fanned out: each bucket is handed to every server's sync still running, and the next
one is exported once they all took it (a bounded hand-off, so at most a bucket or two is held beyond the export).

Before each update the fleet says which servers answer (`ServerFleet.weight_targets`); the others are skipped. A
server whose sync fails during the update because it is gone (its connection broke, a call passed its timeout,
`ServerEngineConfig.update_timeout_s` / `timeout_s`, or it no longer answers `/health`) is dropped from that update
while the others complete theirs. The report's `skipped` names every server left out, and the fleet keeps them out
of generation until a later update reaches them (`ServerFleet.readmit`). A dropped server's sync is closed in the
background (a hung server must not hold the step) and built afresh when an update next targets it. When no server
completes the update, `ServerConnectionError` names each address with its failure; a failure that is not a gone
server (a server that answers but refuses the weights, a checksum mismatch) is raised as itself.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rl_engines.remote._errors import ServerConnectionError
from rl_engines.remote._fleet import ServerFleet
from rl_engines.rollout import EngineTimeoutError, InferenceEngine
from rl_engines.sync import SyncReport, SyncTimeoutError, WeightSync
from rl_engines.sync._transport import Bucket

logger = logging.getLogger(__name__)

_END = object()
"""Fed after the last bucket: the server's sync finishes the update."""
_FEED_DEPTH = 1
"""Buckets waiting for one server's sync beyond the one it is sending."""
_PUT_POLL_S = 0.05
"""How often a hand-off blocked on a full feed checks whether that server's sync has ended."""
_GONE = (ServerConnectionError, EngineTimeoutError, SyncTimeoutError)
"""Failures that mean the server died or hangs (as opposed to one that answers with an error)."""


class _Abort:
    """Fed when the export itself failed: the server's sync raises `error` instead of finishing with a part."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Feed:
    """One server's view of the bucket stream: a bounded queue the exporting thread fills and its sync drains."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_FEED_DEPTH)
        self.ended = threading.Event()
        """Its sync returned or failed: it takes nothing more."""

    def put(self, item: object) -> None:
        """Hand `item` over once there is room, or drop it if the sync has ended."""
        while not self.ended.is_set():
            try:
                self._queue.put(item, timeout=_PUT_POLL_S)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[Bucket]:
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Abort):
                raise item.error
            yield item


class FleetWeightSync:
    """Syncs `fleet`'s live servers, each through `make_sync(server, index)`: a `WeightSync` over that one server
    (member `index` of the fleet) with a fresh transport of its own. See the module doc."""

    def __init__(self, fleet: ServerFleet, make_sync: Callable[[InferenceEngine, int], WeightSync]) -> None:
        self.fleet = fleet
        self._make_sync = make_sync
        self._syncs: dict[int, WeightSync] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=len(fleet.members), thread_name_prefix="fleet-sync"
        )

    @property
    def engines(self) -> list[InferenceEngine]:
        """The servers the last update reached (all of them before the first)."""
        indexes = sorted(self._syncs) if self._syncs else range(len(self.fleet.members))
        return [self.fleet.members[index] for index in indexes]

    def _sync_for(self, index: int) -> WeightSync:
        sync = self._syncs.get(index)
        if sync is None:
            sync = self._syncs[index] = self._make_sync(self.fleet.members[index], index)
        return sync

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Push `buckets` as weight `version` into every server that answers (see the module doc); the report's
        `skipped` names the others. `ServerConnectionError` naming every address when none takes the update."""
        targets = self.fleet.weight_targets()
        for index in set(self._syncs) - set(targets):
            self._discard(index)  # its transport named a server that did not answer: start it afresh
        feeds = {index: _Feed() for index in targets}
        futures = {
            index: self._pool.submit(self._run, self._sync_for(index), feeds[index], version) for index in targets
        }
        try:
            for bucket in buckets:
                for feed in feeds.values():
                    feed.put(bucket)
        except BaseException as error:
            for feed in feeds.values():
                feed.put(_Abort(error))
            concurrent.futures.wait(futures.values())
            raise
        for feed in feeds.values():
            feed.put(_END)
        reports: dict[int, SyncReport] = {}
        failed: dict[int, BaseException] = {}
        for index, future in futures.items():
            try:
                reports[index] = future.result()
            except Exception as error:
                failed[index] = error
        return self._conclude(version, targets, reports, failed)

    @staticmethod
    def _run(sync: WeightSync, feed: _Feed, version: int) -> SyncReport:
        try:
            return sync.sync(feed, version)
        finally:
            feed.ended.set()

    def _conclude(
        self, version: int, targets: list[int], reports: dict[int, SyncReport], failed: dict[int, BaseException]
    ) -> SyncReport:
        addresses = self.fleet.addresses
        gone = {index: error for index, error in failed.items() if self._is_gone(index, error)}
        for index, error in failed.items():
            self._discard(index)
            level = logging.WARNING if index in gone else logging.ERROR
            logger.log(level, "weight version %d did not reach rollout server %s: %s", version, addresses[index], error)
        self.fleet.exclude(failed)
        self.fleet.readmit(reports)
        other = next((error for index, error in failed.items() if index not in gone), None)
        if other is not None:
            raise other
        if not reports:
            named = "; ".join(
                f"{address}: {failed.get(index, 'no answer to its health check')}"
                for index, address in enumerate(addresses)
            )
            raise ServerConnectionError(
                f"weight version {version} reached no rollout server of the fleet ({named}); restart them, or fix "
                "rollout.servers"
            ) from next(iter(failed.values()))
        skipped = tuple(address for index, address in enumerate(addresses) if index not in reports)
        if skipped:
            logger.warning("weight version %d skipped the rollout servers that do not answer: %s", version, skipped)
        first = reports[min(reports)]
        seconds = {phase: max(report.seconds.get(phase, 0.0) for report in reports.values()) for phase in first.seconds}
        return dataclasses.replace(first, seconds=seconds, skipped=skipped)

    def _is_gone(self, index: int, error: BaseException) -> bool:
        """The server died or hangs: a connection or timeout failure, or (a broken weight group's error on this side)
        no answer to `/health` after it."""
        return isinstance(error, _GONE) or not self.fleet.members[index].health()

    def _discard(self, index: int) -> None:
        """Forget server `index`'s sync and close it on a background thread (a hung server bounds each call)."""
        sync = self._syncs.pop(index, None)
        if sync is not None:
            threading.Thread(target=_close_quietly, args=(sync,), name="fleet-sync-close", daemon=True).start()

    def close(self) -> None:
        """Release every server's transport resources and threads."""
        syncs, self._syncs = list(self._syncs.values()), {}
        try:
            for sync in syncs:
                sync.close()
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _close_quietly(sync: WeightSync) -> None:
    try:
        sync.close()
    except Exception as error:  # a dead server cannot leave its group; nothing else holds it
        logger.warning("closing the weight sync of a dropped rollout server: %s", error)
