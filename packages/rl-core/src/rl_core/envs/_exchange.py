"""The pool side of `EnvPool`'s round trips: worker handles, the table of every slot's last answer, and one exchange.

An `Exchange` sends each addressed worker its part of a reset/step, takes the workers' answers as they arrive
(from a blocking `multiprocessing.connection.wait` in a thread, or from the event loop's readers on the pipes) and
turns them into one `EnvObservation`. Answers are kept per worker as whole blocks (`WorkerAnswer`) and written into
`SlotTable`'s per-slot tensors with one indexed copy each, so the per-env Python work of an exchange is only the
videos' views and the instructions.
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


def _index(slots: Sequence[int]) -> slice | list[int]:
    """`slots` as a slice when they are consecutive and ascending (a view, no gather), else as a list."""
    listed = list(slots)
    first = listed[0]
    if listed == list(range(first, first + len(listed))):
        return slice(first, first + len(listed))
    return listed


def _take(table: torch.Tensor, index: slice | list[int]) -> torch.Tensor:
    """Rows `index` of `table` as a new tensor (never a view of the table)."""
    return table[index].clone() if isinstance(index, slice) else table[index]


class SlotTable:
    """Every slot's last answer as tensors indexed by slot: what a failed slot repeats, what counts lost episodes."""

    def __init__(self, spec: EnvSpec, num_envs: int) -> None:
        self.frames = torch.zeros((num_envs, *spec.image_shape), dtype=torch.uint8)
        """(N, C, H, W) uint8 last frame."""
        self.flags = torch.zeros((num_envs, 3), dtype=torch.int64)
        """(N, 3) int64: active, complete, finish_step."""
        self.states: torch.Tensor | None = None
        """(N, Z) float32 last state features, allocated by the first answer that has them."""
        self.has_state = torch.zeros(num_envs, dtype=torch.bool)
        """(N,) bool: the slot's last answer had state features."""
        self.instructions = [""] * num_envs
        self._image_shape = spec.image_shape

    def active(self, slots: Sequence[int]) -> int:
        """How many of `slots` hold a running episode."""
        return int(self.flags[list(slots), 0].sum()) if slots else 0

    def write(self, slots: Sequence[int], answer: WorkerAnswer) -> None:
        """Store a worker's answer for `slots` (the order it was asked in)."""
        index = _index(slots)
        self.frames[index] = answer.frames
        self.flags[index] = answer.flags
        if answer.states is None:
            self.has_state[index] = False
        else:
            if self.states is None:
                self.states = torch.zeros((len(self.instructions), answer.states.shape[1]), dtype=torch.float32)
            self.states[index] = answer.states
            self.has_state[index] = True
        for slot, text in zip(slots, answer.instructions, strict=True):
            self.instructions[slot] = text

    def fail(self, slots: Sequence[int]) -> None:
        """End `slots`' episodes as failed: inactive, not complete; frame, state and finish_step stay."""
        self.flags[list(slots), :2] = 0

    def observe(self, order: Sequence[int], videos: Mapping[int, torch.Tensor], failed: set[int]) -> EnvObservation:
        """The `EnvObservation` of `order` (request order): the table's rows, `videos` per slot (failed: empty)."""
        index = _index(order)
        flags = _take(self.flags, index)
        state = None
        if self.states is not None and bool(self.has_state[index].all()):
            state = _take(self.states, index)
        if failed:
            empty = (0, *self._image_shape)
            clips = tuple(torch.zeros(empty, dtype=torch.uint8) if s in failed else videos[s] for s in order)
            failures = torch.tensor([s in failed for s in order], dtype=torch.bool)
        else:
            clips = tuple([videos[s] for s in order])
            failures = torch.zeros(len(order), dtype=torch.bool)
        return EnvObservation(
            indices=tuple(order),
            frames=_take(self.frames, index),
            instructions=tuple([self.instructions[s] for s in order]),
            active=flags[:, 0].bool(),
            complete=flags[:, 1].bool(),
            finish_step=flags[:, 2].contiguous(),
            failed=failures,
            video=clips,
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
        self.videos: dict[int, torch.Tensor] = {}
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
                self.videos.update(zip(slots, answer.videos, strict=True))
                return
        except (EOFError, OSError):
            kind, body = "error", f"worker exited with code {worker.process.exitcode}"
        self.failures.append((worker, str(body)))

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
