"""The pool side of `EnvPool`'s round trips: worker handles, the table of every slot's last answer, and one exchange.

An `Exchange` sends each addressed worker its part of a reset/step, takes the workers' answers as they arrive
(from a blocking `multiprocessing.connection.wait` in a thread, or from an epoll the event loop watches) and turns
them into one `EnvObservation`. Answers stay whole per worker (`WorkerAnswer` blocks): the observation is one `cat`
per field of the blocks, and `SlotTable` keeps a (block, row) reference per slot for the failure path.
"""

from __future__ import annotations

import asyncio
import math
import select
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory
from rl_core.envs._types import EnvObservation, EnvSpec
from rl_core.envs._worker import AnswerHeader, WorkerAnswer, receive_answers, worker_main

Request = tuple[int, int] | list[list[int]]
"""A reset's (task_id, trial_id) or a step's chunk of K actions of D bins."""


class WorkerHandle:
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
        """Kill the process (if alive), reap it and close the pipe."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()
        self.shared = None


class SlotTable:
    """Every slot's last answer, as (worker answer block, row): what a failed slot repeats, what counts lost episodes.

    Storing a reference per slot costs no tensor work; the rows are only gathered when an observation cannot be the
    concatenation of this exchange's blocks (a failure, or indices not grouped by worker).
    """

    def __init__(self, spec: EnvSpec, num_envs: int) -> None:
        self._empty_video = (0, *spec.image_shape)
        blank = WorkerAnswer(
            torch.zeros((1, 3), dtype=torch.int64),
            torch.zeros((1, *spec.image_shape), dtype=torch.uint8),
            (torch.zeros(self._empty_video, dtype=torch.uint8),),
            None,
            [""],
        )
        self.rows: list[tuple[WorkerAnswer, int]] = [(blank, 0)] * num_envs

    def active(self, slots: Sequence[int]) -> int:
        """How many of `slots` hold a running episode."""
        return sum(int(answer.flags[row, 0]) for answer, row in (self.rows[s] for s in slots))

    def write(self, slots: Sequence[int], answer: WorkerAnswer) -> None:
        """Store a worker's answer for `slots` (the order it was asked in)."""
        for row, slot in enumerate(slots):
            self.rows[slot] = (answer, row)

    def fail(self, slots: Sequence[int]) -> None:
        """End `slots`' episodes as failed: inactive, not complete, no new frames; frame, state and finish_step stay."""
        for slot in slots:
            answer, row = self.rows[slot]
            flags = answer.flags[row : row + 1].clone()
            flags[0, :2] = 0
            states = None if answer.states is None else answer.states[row : row + 1]
            video = torch.zeros(self._empty_video, dtype=torch.uint8)
            failed = WorkerAnswer(flags, answer.frames[row : row + 1], (video,), states, [answer.instructions[row]])
            self.rows[slot] = (failed, 0)

    def observe(
        self, order: Sequence[int], blocks: Sequence[tuple[list[int], WorkerAnswer]], failed: set[int]
    ) -> EnvObservation:
        """The `EnvObservation` of `order` (request order): one `cat` of this exchange's `blocks` (each worker's slots
        and answer, in worker order) when they line up with `order`, else the rows gathered slot by slot."""
        if not failed and [slot for slots, _ in blocks for slot in slots] == list(order):
            answers = [answer for _, answer in blocks]
            frames = torch.cat([a.frames for a in answers])
            flags = torch.cat([a.flags for a in answers])
            parts = [a.states for a in answers]
            state = None if any(p is None for p in parts) else torch.cat(cast("list[torch.Tensor]", parts)).float()
            videos = tuple([video for a in answers for video in a.videos])
            instructions = tuple([text for a in answers for text in a.instructions])
            failures = torch.zeros(len(order), dtype=torch.bool)
        else:
            rows = [self.rows[slot] for slot in order]
            frames = torch.stack([a.frames[i] for a, i in rows])
            flags = torch.stack([a.flags[i] for a, i in rows])
            parts = [None if a.states is None else a.states[i] for a, i in rows]
            state = None if any(p is None for p in parts) else torch.stack(cast("list[torch.Tensor]", parts)).float()
            videos = tuple([a.videos[i] for a, i in rows])
            instructions = tuple([a.instructions[i] for a, i in rows])
            failures = torch.tensor([slot in failed for slot in order], dtype=torch.bool)
        return EnvObservation(
            indices=tuple(order),
            frames=frames,
            instructions=instructions,
            active=flags[:, 0].bool(),
            complete=flags[:, 1].bool(),
            finish_step=flags[:, 2].contiguous(),
            failed=failures,
            video=videos,
            state=state,
        )


class Exchange:
    """One reset/step round trip: what was sent to whom, the answers and the worker failures gathered so far."""

    def __init__(
        self,
        command: str,
        requests: Mapping[int, Request],
        owner: Mapping[int, WorkerHandle],
        lost: set[int],
        step_timeout_s: float,
    ) -> None:
        self.command = command
        self.requests = requests
        self.order = list(requests)
        self.failed: set[int] = {slot for slot in self.order if slot in lost}
        """Slots answered as failed (lost with an earlier failure, or their worker failed now)."""
        self.by_worker: dict[WorkerHandle, list[int]] = {}
        for slot in self.order:
            if slot not in lost:
                self.by_worker.setdefault(owner[slot], []).append(slot)
        self.pending: dict[Connection, WorkerHandle] = {}
        """Workers sent their part and not answered yet, by pipe."""
        self.failures: list[tuple[WorkerHandle, str]] = []
        """Workers that failed in this exchange and why; the pool restarts them."""
        self.answers: dict[WorkerHandle, WorkerAnswer] = {}
        self.step_timeout_s = step_timeout_s
        self.deadline = math.inf

    def send(self) -> None:
        """Send every addressed worker its part; a closed pipe is a failure. Starts the answer deadline."""
        for worker, slots in self.by_worker.items():
            try:
                worker.conn.send((self.command, [(slot - worker.slots.start, self.requests[slot]) for slot in slots]))
            except OSError:  # the worker died since its last answer (a closed pipe)
                self.failures.append((worker, f"worker exited with code {worker.process.exitcode}"))
                continue
            self.pending[worker.conn] = worker
        self.deadline = time.monotonic() + self.step_timeout_s

    def take(self, conn: Connection, table: SlotTable) -> None:
        """Read the answer waiting on `conn` into `table` (or note its worker's failure)."""
        worker = self.pending.pop(conn)
        slots = self.by_worker[worker]
        try:
            kind, body = worker.conn.recv()
            if kind in ("ok", "shared"):
                shared = worker.shared if kind == "shared" else None
                answer = receive_answers(worker.conn, cast(AnswerHeader, body), shared)
                table.write(slots, answer)
                self.answers[worker] = answer
                return
        except (EOFError, OSError):
            kind, body = "error", f"worker exited with code {worker.process.exitcode}"
        self.failures.append((worker, str(body)))

    def blocks(self) -> list[tuple[list[int], WorkerAnswer]]:
        """The answers received, each with its worker's requested slots, in the order the workers were addressed."""
        return [(slots, self.answers[worker]) for worker, slots in self.by_worker.items() if worker in self.answers]

    def expire(self) -> None:
        """Every worker still silent at the deadline fails."""
        for worker in self.pending.values():
            self.failures.append((worker, f"no answer within env.step_timeout_s={self.step_timeout_s}s"))
        self.pending.clear()


async def gather_on_loop(exchange: Exchange, table: SlotTable, poller: select.epoll) -> None:
    """Take `exchange`'s answers as they arrive without blocking the running event loop, until every addressed
    worker answered or the deadline passed (the silent ones expire then).

    The pending pipes are registered in `poller` (an epoll) and the loop watches its one fd, so an exchange costs
    one reader and one timer on the loop whatever the number of workers. Cancelled, it leaves the pending workers
    in `exchange.pending` for a blocking reader to finish.
    """
    if not exchange.pending:  # every send failed
        return
    loop = asyncio.get_running_loop()
    conns = {conn.fileno(): conn for conn in exchange.pending}
    for fd in conns:
        poller.register(fd, select.EPOLLIN)
    done: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        try:
            for fd, _ in poller.poll(0):
                poller.unregister(fd)
                exchange.take(conns.pop(fd), table)
        except BaseException as error:  # a bug must not leave the call waiting for its deadline
            if not done.done():
                done.set_exception(error)
            return
        if not exchange.pending and not done.done():
            done.set_result(None)

    loop.add_reader(poller.fileno(), on_readable)
    timer = loop.call_later(max(0.0, exchange.deadline - time.monotonic()), _wake, done)
    try:
        await done
    finally:
        timer.cancel()
        loop.remove_reader(poller.fileno())
        for fd in conns:  # the workers still silent
            poller.unregister(fd)
    exchange.expire()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
