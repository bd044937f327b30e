"""`ServerFleet`: several rollout servers behind one `InferenceEngine`, balanced per request.

Generation deals each request to the next server in generation (round robin over the fleet); a server that cannot
be reached, or whose connection breaks while it generates (it died), is marked down (a warning) and its requests go
to the others (up to `retries` times); it is probed again after `health_interval_s`. A request that streamed tokens
(`on_tokens`) before its server died is not retried: its tokens were delivered, and a retry would deliver them again.
`FleetHealth` (`_fleet_health.py`) keeps the account of the servers marked down and of those that missed an update.
The trainer syncs the `members` one by one, through a `FleetWeightSync`: each update goes to the servers that answer
then (`weight_targets`), skips the others, drops those that die or hang during it (`exclude`), and a server that
missed an update rejoins generation only once an update reached it again (`readmit`), never with old weights. The
fleet's own weight calls (`update_weights_from_disk`, `update_weights_from_tensors`, `set_weight_version`) go to
every server and fail when one fails; control calls (status, pause, resume, abort, sleep, wake, flush) and the
version and checksum reads go to the servers not marked down. `shutdown` closes the clients and stops the servers
the fleet started (`owned`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Literal, TypeVar

from rl_engines.remote._engine import RemoteEngine
from rl_engines.remote._errors import ServerConnectionError
from rl_engines.remote._fleet_health import FleetHealth, Streamed, refuse_restream
from rl_engines.remote._launch import LocalServer
from rl_engines.rollout import (
    EngineStateError,
    EngineStatus,
    GenerateOutput,
    GenerateRequest,
    LogprobMode,
    NamedTensors,
    PauseMode,
    SharedTensorBucket,
    TokenCallback,
    WeightGroupSpec,
    WeightsMeta,
    check_requests,
)
from rl_engines.rollout._submit import RequestThreads, agenerate_by_submit, failed_future

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ServerFleet:
    """An `InferenceEngine` over `members` (one `RemoteEngine` per server); see the module doc."""

    def __init__(
        self,
        members: Sequence[RemoteEngine],
        *,
        retries: int = 2,
        health_interval_s: float = 5.0,
        owned: Sequence[LocalServer] = (),
    ) -> None:
        if not members:
            raise EngineStateError("ServerFleet needs at least one server")
        modes = {member.logprob_mode for member in members}
        if len(modes) > 1:
            raise EngineStateError(f"the fleet's servers disagree on logprob_mode: {sorted(modes)}")
        self.members = list(members)
        """The servers' clients, in the order given."""
        self.owned = list(owned)
        self.retries = retries
        self._health = FleetHealth([member.config.base_url for member in members], health_interval_s)
        self._next = 0
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(2, 2 * len(members)), thread_name_prefix="fleet"
        )
        self._capabilities = frozenset.intersection(*(member.capabilities for member in members))
        self._closed = False
        self._threads = RequestThreads(
            self._run_one,
            self.abort,
            self.weight_version,
            max_workers=sum(member.config.max_connections for member in members),
            name="fleet-submit",
            abort_retry_s=0.2,
        )

    @property
    def addresses(self) -> list[str]:
        """The servers' base URLs."""
        return [member.config.base_url for member in self.members]

    @property
    def health_interval_s(self) -> float:
        """Seconds between the probes of a server marked down."""
        return self._health.health_interval_s

    @health_interval_s.setter
    def health_interval_s(self, seconds: float) -> None:
        self._health.health_interval_s = seconds

    @property
    def capabilities(self) -> frozenset[str]:
        """What every server of the fleet supports."""
        return self._capabilities

    @property
    def logprob_mode(self) -> LogprobMode:
        """The servers' (common) log-prob mode."""
        return self.members[0].logprob_mode

    # ---- generation ------------------------------------------------------------------------------
    def _healthy(self) -> list[int]:
        """Indexes of the members to use now: those not down, and those down whose re-probe succeeds."""
        return self._health.usable(lambda index: self.members[index].health())

    @property
    def down(self) -> list[str]:
        """The addresses of the servers marked down now (unreachable at their last call or probe)."""
        return self._health.down_addresses()

    def weight_targets(self) -> list[int]:
        """The indexes of the members a weight update goes to now: every server that answers its health check, a
        down one that answers again included (the update brings it up to date); the others are marked down and
        will miss the update. `ServerConnectionError` naming every address when none answers."""
        return self._health.weight_targets(list(self._pool.map(lambda member: member.health(), self.members)))

    def exclude(self, indexes: Collection[int]) -> None:
        """The members `indexes` missed a weight update (they died or hung during it): out of generation until a later
        update reaches them (`readmit`)."""
        self._health.exclude(indexes)

    def readmit(self, indexes: Collection[int]) -> None:
        """The members `indexes` hold the latest weights (a weight update reached them): serve from them again."""
        self._health.readmit(indexes)

    def _deal(self, batch: list[GenerateRequest], usable: list[int]) -> dict[int, list[int]]:
        """Request positions per member index, round robin from where the last call stopped."""
        shares: dict[int, list[int]] = {}
        with self._lock:
            for position in range(len(batch)):
                member = usable[self._next % len(usable)]
                self._next += 1
                shares.setdefault(member, []).append(position)
        return shares

    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """See `InferenceEngine.submit`: the request goes to the next healthy server (retried on another when one
        cannot be reached), from a pool thread."""
        try:
            check_requests([request])
        except Exception as error:
            return failed_future(error)
        return self._threads.submit(request, on_tokens)

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """See `InferenceEngine.agenerate`."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """See `InferenceEngine.cancel` (aborted on every server, as `abort`)."""
        if rid in self._threads.rids():
            self._threads.cancel(rid)
        else:
            self.abort([rid])

    def _run_one(self, request: GenerateRequest, on_tokens: TokenCallback | None, _cancelled: object) -> GenerateOutput:
        last_error: Exception | None = None
        for _ in range(self.retries + 1):
            usable = self._healthy()
            if not usable:
                break
            member = next(iter(self._deal([request], usable)))
            stream = None if on_tokens is None else Streamed(on_tokens)
            try:
                return self.members[member].generate([request], on_tokens=stream)[0]
            except ServerConnectionError as error:
                self._health.mark_down(member, error)
                refuse_restream(stream, self.addresses[member], error)
                last_error = error
        raise ServerConnectionError(
            f"request {request.rid!r} found no rollout server that answers among {self.addresses} after "
            f"{self.retries} retries: {last_error}"
        )

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """See `InferenceEngine.generate`: the requests are dealt over the healthy servers; those of a server that
        cannot be reached are retried on the others."""
        batch = check_requests(requests)
        outputs: list[GenerateOutput | None] = [None] * len(batch)
        pending = list(range(len(batch)))
        last_error: Exception | None = None
        for _ in range(self.retries + 1):
            usable = self._healthy()
            if not usable:
                break
            shares = self._deal([batch[i] for i in pending], usable)
            streams = {member: None if on_tokens is None else Streamed(on_tokens) for member in shares}
            futures = {
                member: self._pool.submit(
                    self.members[member].generate, [batch[pending[i]] for i in share], on_tokens=streams[member]
                )
                for member, share in shares.items()
            }
            failed: list[int] = []
            for member, future in futures.items():
                positions = [pending[i] for i in shares[member]]
                try:
                    for position, output in zip(positions, future.result(), strict=True):
                        outputs[position] = output
                except ServerConnectionError as error:
                    self._health.mark_down(member, error)
                    refuse_restream(streams[member], self.addresses[member], error)
                    last_error = error
                    failed += positions
            if not failed:
                return [output for output in outputs if output is not None]
            pending = sorted(failed)
        raise ServerConnectionError(
            f"{len(pending)} of {len(batch)} requests found no rollout server that answers among {self.addresses} "
            f"after {self.retries} retries: {last_error}"
        )

    # ---- every server ----------------------------------------------------------------------------
    def _each(self, call: Callable[[RemoteEngine], T]) -> list[T]:
        futures = [self._pool.submit(call, member) for member in self.members]
        results, first_error = [], None
        for future in futures:
            try:
                results.append(future.result())
            except Exception as error:  # every call ends before the first failure is raised
                first_error = first_error or error
        if first_error is not None:
            raise first_error
        return results

    def _each_live(self, call: Callable[[RemoteEngine], T]) -> list[T]:
        """`call` on every member not marked down (control calls: status, pause, sleep...); a member that cannot be
        reached is marked down and left out. `ServerConnectionError` naming the addresses when none answers."""
        live = self._health.live()
        futures = {index: self._pool.submit(call, self.members[index]) for index in live}
        results, first_error = [], None
        for index, future in futures.items():
            try:
                results.append(future.result())
            except ServerConnectionError as error:
                self._health.mark_down(index, error)
            except Exception as error:  # every call ends before the first failure is raised
                first_error = first_error or error
        if first_error is not None:
            raise first_error
        if not results:
            raise ServerConnectionError(
                f"no rollout server of the fleet answers: {', '.join(self.addresses)}; restart them, or fix "
                "rollout.servers"
            )
        return results

    def _same(self, values: list[T], what: str) -> T:
        if any(value != values[0] for value in values[1:]):
            raise EngineStateError(
                f"the fleet's servers disagree on {what}: {dict(zip(self.addresses, values, strict=True))}"
            )
        return values[0]

    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """Pause every server."""
        self._each_live(lambda member: member.pause(mode, timeout_s=timeout_s))

    def resume(self) -> None:
        """Resume every server."""
        self._each_live(lambda member: member.resume())

    def abort(self, rids: Collection[str] | None = None) -> None:
        """Abort `rids` (None: all) on every server."""
        self._each_live(lambda member: member.abort(rids))

    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """Put every server to sleep."""
        self._each_live(lambda member: member.sleep(level))

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """Wake every server."""
        self._each_live(lambda member: member.wake_up(tags))

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """Every server loads the checkpoint at `path` (which each must be able to read)."""
        self._each(lambda member: member.update_weights_from_disk(path))

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> Collection[str] | None:
        """Named tensors go to every server; a `SharedTensorBucket` is one lender's buffer for one engine: send it
        to the `members` one by one (`WeightSync(fleet.members, ...)`)."""
        if isinstance(tensors, SharedTensorBucket):
            raise EngineStateError("a SharedTensorBucket addresses one engine; sync a ServerFleet through its members")
        self._each(lambda member: member.update_weights_from_tensors(tensors))
        return None

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """A weight group gives each engine its own rank: sync a fleet through its `members`."""
        raise EngineStateError("a weight-update group gives each server its own rank; sync a ServerFleet's members")

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """See `init_weights_update_group`."""
        raise EngineStateError("a weight-update group gives each server its own rank; sync a ServerFleet's members")

    def destroy_weights_update_group(self) -> None:
        """Every server leaves its weight group (a no-op where it has none)."""
        self._each(lambda member: member.destroy_weights_update_group())

    def flush_cache(self) -> None:
        """Flush every server's prefix cache."""
        self._each_live(lambda member: member.flush_cache())

    def set_weight_version(self, version: int) -> None:
        """Label every server's weights `version`."""
        self._each(lambda member: member.set_weight_version(version))

    def weight_version(self) -> int:
        """The weight version of the servers in generation (not marked down); `EngineStateError` if they differ."""
        return self._same(self._each_live(lambda member: member.weight_version()), "the weight version")

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """The weights checksum of the servers in generation; `EngineStateError` if they differ."""
        return self._same(self._each_live(lambda member: member.weights_checksum(names)), "the weights checksum")

    def status(self) -> EngineStatus:
        """The first live server's status, with the in-flight count of the live servers."""
        statuses = self._each_live(lambda member: member.status())
        return EngineStatus(
            state=statuses[0].state,
            weight_version=statuses[0].weight_version,
            in_flight=sum(status.in_flight for status in statuses),
            pause_mode=statuses[0].pause_mode,
            asleep=statuses[0].asleep,
            weights_loaded=all(status.weights_loaded for status in statuses),
        )

    def health(self) -> bool:
        """True while at least one server answers."""
        return not self._closed and any(member.health() for member in self.members)

    def shutdown(self) -> None:
        """Close every client and stop the servers the fleet started."""
        if self._closed:
            return
        self._closed = True
        self._threads.shutdown()
        try:
            for member in self.members:
                member.shutdown()
        finally:
            for server in self.owned:
                server.stop()
            self._pool.shutdown(wait=False, cancel_futures=True)
