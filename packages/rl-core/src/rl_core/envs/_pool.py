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
import threading
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory, SlotAnswer, assemble
from rl_core.envs._registry import check_reset_args, check_step_args
from rl_core.envs._types import EnvConfigError, EnvError, EnvObservation, EnvSpec
from rl_core.envs._worker import AnswerHeader, receive_answers, worker_main

logger = logging.getLogger(__name__)


MAX_SHARED_BYTES = 64 * 2**20
"""Cap of one worker's shared answer buffer; a larger answer travels through the pipe instead."""


def shared_bytes_for(spec: EnvSpec, num_slots: int) -> int:
    """Bytes of shared buffer that hold `num_slots` envs' answers to chunks of up to `spec.max_steps` steps (frame,
    video and a little room for state features), capped at `MAX_SHARED_BYTES`."""
    frame = math.prod(spec.image_shape)
    return min(MAX_SHARED_BYTES, num_slots * ((spec.max_steps + 1) * frame + 4096) + 4096)


class _Worker:
    """One worker process, the pipe to it, its shared answer buffer and the env slots it holds."""

    def __init__(
        self, ctx: SpawnContext, factory: EpisodeEnvFactory, spec: EnvSpec, slots: range, shared_bytes: int
    ) -> None:
        self.slots = slots
        self.conn: Connection
        self.process: SpawnProcess
        self.shared: torch.Tensor | None = None
        self.ready = False
        self._ctx, self._factory, self._spec, self._shared_bytes = ctx, factory, spec, shared_bytes
        self.start()

    def start(self) -> None:
        """Spawn a fresh process holding this worker's slots (its envs are built anew) and a fresh shared buffer."""
        parent, child = self._ctx.Pipe()
        self.conn = cast(Connection, parent)  # a PipeConnection only on Windows
        shared: torch.Tensor | None = None
        if self._shared_bytes:
            shared = torch.empty(self._shared_bytes, dtype=torch.uint8)
            shared.share_memory_()  # pyright: ignore[reportUnknownMemberType]  # torch: untyped
        self.shared = shared
        self.process = self._ctx.Process(
            target=worker_main, args=(child, self._factory, self._spec, len(self.slots), shared), daemon=True
        )
        self.process.start()
        child.close()
        self.ready = False

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()
        self.shared = None


class EnvPool:
    """N `EpisodeEnv`s in `num_workers` spawned processes (contiguous slot ranges), stepped in parallel.

    Every `reset`/`step` call waits at most `step_timeout_s` for the workers it addresses (the blocking wait runs in
    a thread, off the event loop). A worker that crashes, raises or does not answer in time is killed and restarted;
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
        self._workers: list[_Worker] = []
        for w in range(num_workers):
            slots = range(bounds[w], bounds[w + 1])
            size = shared_bytes_for(spec, len(slots)) if shared_bytes is None else shared_bytes
            self._workers.append(_Worker(ctx, factory, spec, slots, size))
        self._owner = {slot: w for w in self._workers for slot in w.slots}
        blank = torch.zeros(spec.image_shape, dtype=torch.uint8)
        self._last = [SlotAnswer(blank, "", False, False, 0, blank[:0].unsqueeze(0)[:0], None) for _ in range(num_envs)]
        self._lost: set[int] = set()
        self._closed = False
        self._lock = threading.Lock()  # one exchange with the workers at a time (calls run in threads)
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
        return await asyncio.to_thread(self._exchange, "reset", requests)

    async def step(self, indices: Sequence[int], actions: torch.Tensor) -> EnvObservation:
        """Run one chunk `actions` (N, K, D) int64 on the envs at `indices`."""
        self._check_open()
        check_step_args(self._spec, self._num_envs, indices, actions)
        chunks = cast("list[list[list[int]]]", actions.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`
        return await asyncio.to_thread(self._exchange, "step", dict(zip(indices, chunks, strict=True)))

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

    def _exchange(self, command: str, requests: Mapping[int, tuple[int, int] | list[list[int]]]) -> EnvObservation:
        """Send each worker its part of `requests`, gather answers until the deadline, fail the rest."""
        with self._lock:
            return self._exchange_locked(command, requests)

    def _exchange_locked(
        self, command: str, requests: Mapping[int, tuple[int, int] | list[list[int]]]
    ) -> EnvObservation:
        if command == "reset":
            self._lost.difference_update(requests)
        by_worker: dict[_Worker, list[int]] = {}
        for slot in requests:
            if slot not in self._lost:
                by_worker.setdefault(self._owner[slot], []).append(slot)
        answers: dict[int, SlotAnswer] = {}
        failed: set[int] = set(slot for slot in requests if slot in self._lost)
        pending: dict[Connection, _Worker] = {}
        for worker, slots in by_worker.items():
            self._await_ready(worker)
            try:
                worker.conn.send((command, [(slot - worker.slots.start, requests[slot]) for slot in slots]))
            except OSError:  # the worker died since its last answer (a closed pipe)
                self._fail(worker, f"worker exited with code {worker.process.exitcode}", failed, slots)
                continue
            pending[worker.conn] = worker
        deadline = time.monotonic() + self._step_timeout_s
        while pending:
            ready = wait(list(pending), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for conn in ready:
                worker = pending.pop(conn)  # pyright: ignore[reportArgumentType] - wait returns the conns it was given
                slots = by_worker[worker]
                try:
                    kind, body = worker.conn.recv()
                    if kind in ("ok", "shared"):
                        shared = worker.shared if kind == "shared" else None
                        got = receive_answers(worker.conn, cast(AnswerHeader, body), shared)
                        answers.update(zip(slots, got, strict=True))
                except (EOFError, OSError):
                    kind, body = "error", f"worker exited with code {worker.process.exitcode}"
                if kind not in ("ok", "shared"):
                    self._fail(worker, str(body), failed, slots)
        for worker in pending.values():
            self._fail(
                worker, f"no answer within env.step_timeout_s={self._step_timeout_s}s", failed, by_worker[worker]
            )
        order = list(requests)
        for slot in order:
            if slot in failed:
                last = self._last[slot]
                empty = last.video[:0] if last.video.dim() == 4 else torch.zeros((0, *self._spec.image_shape))
                answers[slot] = last._replace(active=False, complete=False, video=empty.to(torch.uint8))
            self._last[slot] = answers[slot]
        return assemble(order, [answers[s] for s in order], [s in failed for s in order])

    def _await_ready(self, worker: _Worker) -> None:
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

    def _fail(self, worker: _Worker, reason: str, failed: set[int], requested: list[int]) -> None:
        """Kill and restart `worker`; its requested slots fail now, its other running episodes on their next call."""
        self.worker_failures += 1
        lost = [s for s in worker.slots if s not in requested and self._last[s].active]
        self.failed_episodes += sum(1 for s in requested if self._last[s].active) + len(lost)
        logger.warning("env worker for slots %s failed (%s); restarting it", list(worker.slots), reason.strip())
        worker.kill()
        worker.start()
        failed.update(requested)
        self._lost.update(lost)

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self._spec.name!r} env pool is closed; build a new one with make_env")
