"""`EnvPool`: the contract's `VectorEnv` over N envs spread over subprocess workers, with a per-call timeout.

It lives in rl-core because it needs only torch and the standard library (`multiprocessing`, spawn start method), so
any layer, and any framework using the env seam, can run envs in parallel without a Ray or numpy dependency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing as mp
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import wait
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory
from rl_core.envs._exchange import Exchange, Request, SlotTable, WorkerHandle, gather_on_loop
from rl_core.envs._registry import check_reset_args, check_step_args
from rl_core.envs._types import EnvConfigError, EnvError, EnvObservation, EnvSpec

logger = logging.getLogger(__name__)


MAX_SHARED_BYTES = 64 * 2**20
"""Cap of one worker's shared answer buffer; a larger answer travels through the pipe instead."""


def shared_bytes_for(spec: EnvSpec, num_slots: int) -> int:
    """Bytes of shared buffer that hold `num_slots` envs' answers to chunks of up to `spec.max_steps` steps (frame,
    video and a little room for state features), capped at `MAX_SHARED_BYTES`."""
    frame = math.prod(spec.image_shape)
    return min(MAX_SHARED_BYTES, num_slots * ((spec.max_steps + 1) * frame + 4096) + 4096)


class EnvPool:
    """N `EpisodeEnv`s in `num_workers` spawned processes (contiguous slot ranges), stepped in parallel.

    Every `reset`/`step` call waits at most `step_timeout_s` for the workers it addresses, on the calling event loop
    (readers on the worker pipes, no thread hop); a call that must block (another call in flight, a worker starting,
    a failed worker being restarted) runs in a thread, and a cancelled call's answers are read in one, so the event
    loop never blocks on a worker. A worker that crashes, raises or does not answer in time is killed and restarted;
    the episodes it held end as `failed` (inactive, not complete, `finish_step` = steps executed before the failure)
    and are counted in `worker_failures` / `failed_episodes`, which a rollout can report as metrics. A worker's first
    answer after (re)starting may take `start_timeout_s` (spawning imports torch and builds the envs).

    Each worker writes its answers into a shared-memory buffer of `shared_bytes` (default: room for its envs'
    longest chunk, see `shared_bytes_for`; 0 sends every answer through the pipe).
    """

    def __init__(
        self,
        spec: EnvSpec,
        factory: EpisodeEnvFactory,
        num_envs: int,
        num_workers: int,
        step_timeout_s: float = 30.0,
        start_timeout_s: float = 120.0,
        shared_bytes: int | None = None,
    ) -> None:
        if not 1 <= num_workers <= num_envs:
            raise EnvConfigError(
                f"env.num_workers must lie in [1, num_envs={num_envs}], got {num_workers}; lower env.num_workers"
            )
        self._spec = spec
        self._num_envs = num_envs
        self._step_timeout_s = step_timeout_s
        self._start_timeout_s = start_timeout_s
        ctx = mp.get_context("spawn")
        bounds = [num_envs * w // num_workers for w in range(num_workers + 1)]
        self._workers: list[WorkerHandle] = []
        for w in range(num_workers):
            slots = range(bounds[w], bounds[w + 1])
            size = shared_bytes_for(spec, len(slots)) if shared_bytes is None else shared_bytes
            self._workers.append(WorkerHandle(ctx, factory, spec, slots, size))
        self._owner = {slot: w for w in self._workers for slot in w.slots}
        self._table = SlotTable(spec, num_envs)
        self._lost: set[int] = set()
        self._closed = False
        self._lock = threading.Lock()  # one exchange with the workers at a time (held across the awaits of a call)
        self._poller = select.epoll() if hasattr(select, "epoll") else None  # the pipes an exchange on a loop awaits
        self.worker_failures = 0
        """Workers killed and restarted (crash, error or timeout) since the pool started."""
        self.failed_episodes = 0
        """Episodes ended as `failed` because their worker failed."""

    @property
    def spec(self) -> EnvSpec:
        """The env's `EnvSpec`."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Number of env slots."""
        return self._num_envs

    @property
    def worker_pids(self) -> list[int]:
        """Process id of each worker (a restarted worker has a new one)."""
        return [w.process.pid or 0 for w in self._workers]

    async def reset(self, task_ids: Sequence[int], trial_ids: Sequence[int]) -> EnvObservation:
        """Reset envs 0..len(task_ids)-1 to the given (task, trial) initial states."""
        self._check_open()
        check_reset_args(self._spec, self._num_envs, task_ids, trial_ids)
        requests = {slot: (task, trial) for slot, (task, trial) in enumerate(zip(task_ids, trial_ids, strict=True))}
        return await self._call("reset", requests)

    async def step(self, indices: Sequence[int], actions: torch.Tensor) -> EnvObservation:
        """Run one chunk `actions` (N, K, D) int64 on the envs at `indices`."""
        self._check_open()
        check_step_args(self._spec, self._num_envs, indices, actions)
        chunks = cast("list[list[list[int]]]", actions.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`
        return await self._call("step", dict(zip(indices, chunks, strict=True)))

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.conn.send(("close", None))
        for worker in self._workers:
            worker.process.join(timeout=5)
            worker.kill()
        if self._poller is not None:
            self._poller.close()

    async def _call(self, command: str, requests: Mapping[int, Request]) -> EnvObservation:
        """One exchange, on the event loop when it can be: the pool is free, the addressed workers are up and the
        platform has epoll (Linux). Otherwise, and for restarting failed workers, it runs in a thread."""
        if not self._lock.acquire(blocking=False):  # another call's exchange is in flight: queue behind it
            return await asyncio.to_thread(self._exchange, command, requests)
        exchange = self._plan(command, requests)
        if self._poller is None or not all(worker.ready for worker in exchange.by_worker):
            return await _in_thread(self._finish_and_release, exchange, True)
        exchange.send()
        try:
            await gather_on_loop(exchange, self._table, self._poller)
        except BaseException:  # cancelled: the workers answer anyway; read them off the pipes in a thread
            threading.Thread(target=self._finish_and_release, args=(exchange, False), daemon=True).start()
            raise
        if exchange.failures:  # killing and respawning workers blocks
            return await _in_thread(self._finish_and_release, exchange, False)
        return self._finish_and_release(exchange, False)

    def _exchange(self, command: str, requests: Mapping[int, Request]) -> EnvObservation:
        """A whole exchange, blocking (in a thread): wait for the pool, start-up and the answers until the deadline."""
        self._lock.acquire()
        return self._finish_and_release(self._plan(command, requests), True)

    def _plan(self, command: str, requests: Mapping[int, Request]) -> Exchange:
        """The exchange for `requests` (the lock is held); a reset brings lost slots back."""
        if command == "reset":
            self._lost.difference_update(requests)
        return Exchange(command, requests, self._owner, self._lost, self._step_timeout_s)

    def _finish_and_release(self, exchange: Exchange, send: bool) -> EnvObservation:
        """Send `exchange` (when `send`: after each addressed worker is up), wait for its answers until the deadline,
        restart the workers that failed and build the observation; then release the pool's lock."""
        try:
            if send:
                for worker in exchange.by_worker:
                    self._await_ready(worker)
                exchange.send()
            while exchange.pending:
                ready = wait(list(exchange.pending), timeout=max(0.0, exchange.deadline - time.monotonic()))
                if not ready:
                    break
                for conn in ready:
                    exchange.take(conn, self._table)  # pyright: ignore[reportArgumentType] - wait returns its conns
            exchange.expire()
            for worker, reason in exchange.failures:
                self._fail(worker, reason, exchange.failed, exchange.by_worker[worker])
            if exchange.failed:
                self._table.fail(sorted(exchange.failed))
            return self._table.observe(exchange.order, exchange.blocks(), exchange.failed)
        finally:
            self._lock.release()

    def _await_ready(self, worker: WorkerHandle) -> None:
        """Wait for a (re)started worker's "ready"; one that dies or stays silent means its envs cannot be built."""
        if worker.ready:
            return
        if worker.conn.poll(self._start_timeout_s):
            try:
                kind, _ = worker.conn.recv()
                worker.ready = kind == "ready"
            except (EOFError, OSError):
                worker.ready = False
        if not worker.ready:
            code = worker.process.exitcode
            worker.kill()
            raise EnvError(
                f"{self._spec.name!r} env worker did not start within {self._start_timeout_s}s (exit code {code}); "
                "see its traceback above, and check that the env builds in this process (env.num_workers: 0)"
            )

    def _fail(self, worker: WorkerHandle, reason: str, failed: set[int], requested: list[int]) -> None:
        """Kill and restart `worker`; its requested slots fail now, its other running episodes on their next call."""
        self.worker_failures += 1
        lost = [s for s in worker.slots if s not in requested and self._table.active([s])]
        self.failed_episodes += self._table.active(requested) + len(lost)
        logger.warning("env worker for slots %s failed (%s); restarting it", list(worker.slots), reason.strip())
        worker.kill()
        worker.start()
        failed.update(requested)
        self._lost.update(lost)

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self._spec.name!r} env pool is closed; build a new one with make_env")


async def _in_thread(
    finish: Callable[[Exchange, bool], EnvObservation], exchange: Exchange, send: bool
) -> EnvObservation:
    """`finish(exchange, send)` in a new thread that runs to its end even if the awaiting call is cancelled first
    (`asyncio.to_thread` drops a job cancelled before it starts, which would keep the pool's lock held forever)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[EnvObservation] = loop.create_future()

    def run() -> None:
        try:
            outcome: EnvObservation | BaseException = finish(exchange, send)
        except BaseException as error:
            outcome = error
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for the answer
            loop.call_soon_threadsafe(_settle, future, outcome)

    threading.Thread(target=run, daemon=True).start()
    return await future


def _settle(future: asyncio.Future[EnvObservation], outcome: EnvObservation | BaseException) -> None:
    if future.cancelled():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
