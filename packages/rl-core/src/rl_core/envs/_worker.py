"""The body of an `EnvPool` worker process and the transfer of its answers to the pool.

Each worker owns a shared-memory byte buffer, allocated by the pool when the worker starts and handed to it once.
An answer's tensors (frames, videos, states) are written straight into that buffer and only a small pickled
header crosses the pipe; the pool copies the used part of the buffer out in one piece before it sends the worker
its next command, so the worker never overwrites an answer still being read. An answer too large for the buffer
travels as the header followed by each tensor's raw bytes (`send_bytes`, read with `recv_bytes_into`).

Pickling a tensor for a `multiprocessing` pipe instead moves it into a new shared memory segment whose file
descriptor the receiver fetches over a socket from the sender's resource-sharer thread: a connection and a round
trip to the worker per tensor, every step. Raw bytes avoid that, but a pipe moves ~750 KB of frames a step in
64 KB pieces (two copies on the receiving side and a context switch per piece); the shared buffer avoids those.
"""

from __future__ import annotations

import ctypes
import math
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import NamedTuple, cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory, EpisodeRunner, SlotAnswer
from rl_core.envs._types import EnvSpec

AnswerHeader = tuple[list[tuple[torch.dtype, tuple[int, ...]]], list[int], list[str]]
"""(dtype and shape of each answer tensor: flags (N, 3), frames (N, C, H, W), videos concatenated (sum T, C, H, W),
then states (N, Z) when every env has them; video lengths; instruction per env)."""


class WorkerAnswer(NamedTuple):
    """One worker's answers for the slots it was asked about (request order), as whole blocks."""

    flags: torch.Tensor
    """(n, 3) int64: active, complete, finish_step of each env."""
    frames: torch.Tensor
    """(n, C, H, W) uint8."""
    videos: tuple[torch.Tensor, ...]
    """n tensors (T_i, C, H, W) uint8, views of one block."""
    states: torch.Tensor | None
    """(n, Z), or None unless every env has state features."""
    instructions: list[str]
    """n language instructions."""


_ALIGN = 64
"""Byte alignment of each tensor inside the shared buffer (any dtype can view an aligned slice)."""


def _offsets(specs: Sequence[tuple[torch.dtype, tuple[int, ...]]]) -> tuple[list[int], int]:
    """Byte offset of each tensor in the shared buffer and the bytes used in all."""
    offsets: list[int] = []
    end = 0
    for dtype, shape in specs:
        offsets.append(end)
        end += -(-math.prod(shape) * dtype.itemsize // _ALIGN) * _ALIGN
    return offsets, end


def _view(buffer: torch.Tensor, offset: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor of `dtype` and `shape` stored at byte `offset` of uint8 `buffer`."""
    nbytes = math.prod(shape) * dtype.itemsize
    piece = buffer[offset : offset + nbytes]
    return (piece if dtype == torch.uint8 else piece.view(dtype)).view(shape)


def _raw(tensor: torch.Tensor) -> bytes | ctypes.Array[ctypes.c_char]:
    """A zero-copy byte view of contiguous `tensor` (valid while it lives)."""
    if tensor.nbytes == 0:
        return b""
    return (ctypes.c_char * tensor.nbytes).from_address(tensor.data_ptr())


def _read(conn: Connection, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Read one tensor's raw bytes from `conn` into a new tensor of `dtype` and `shape`."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        conn.recv_bytes()
        return torch.empty(shape, dtype=dtype)
    buffer = bytearray(nbytes)
    conn.recv_bytes_into(buffer)
    return torch.frombuffer(buffer, dtype=dtype).view(shape)


def send_answers(conn: Connection, answers: Sequence[SlotAnswer], shared: torch.Tensor | None = None) -> None:
    """Send a worker's answers: their tensors into `shared` (uint8) and ("shared", `AnswerHeader`) on the pipe when
    they fit, else ("ok", `AnswerHeader`) followed by the raw bytes of each tensor it lists."""
    frame, video = answers[0].frame, answers[0].video
    states = [a.state for a in answers]
    flags = torch.tensor([(a.active, a.complete, a.finish_step) for a in answers], dtype=torch.int64)
    # Each answer tensor after the flags: how it is made from the envs' parts, and its dtype and shape.
    parts: list[tuple[Callable[..., torch.Tensor], list[torch.Tensor]]] = [
        (torch.stack, [a.frame for a in answers]),
        (torch.cat, [a.video for a in answers]),
    ]
    specs = [
        (flags.dtype, tuple(flags.shape)),
        (frame.dtype, (len(answers), *frame.shape)),
        (video.dtype, (sum(a.video.shape[0] for a in answers), *video.shape[1:])),
    ]
    if all(s is not None for s in states):
        stacked = cast("list[torch.Tensor]", states)
        parts.append((torch.stack, stacked))
        specs.append((stacked[0].dtype, (len(answers), *stacked[0].shape)))
    header: AnswerHeader = (specs, [a.video.shape[0] for a in answers], [a.instruction for a in answers])
    offsets, used = _offsets(specs)
    if shared is not None and used <= shared.numel():
        _view(shared, offsets[0], *specs[0]).copy_(flags)
        for (make, group), offset, (dtype, shape) in zip(parts, offsets[1:], specs[1:], strict=True):
            make(group, out=_view(shared, offset, dtype, shape))
        conn.send(("shared", header))
        return
    tensors = [flags, *(make(group) for make, group in parts)]  # built before the header goes out
    conn.send(("ok", header))
    for tensor in tensors:
        conn.send_bytes(_raw(tensor.contiguous()))


def receive_answers(conn: Connection, header: AnswerHeader, shared: torch.Tensor | None = None) -> WorkerAnswer:
    """Rebuild a worker's answers (inverts `send_answers`): copied out of `shared` in one piece when given (a
    "shared" answer), else read from the raw bytes that follow `header` on `conn`."""
    specs, lengths, instructions = header
    if shared is not None:
        offsets, used = _offsets(specs)
        block = shared[:used].clone()
        tensors = [_view(block, offset, dtype, shape) for offset, (dtype, shape) in zip(offsets, specs, strict=True)]
    else:
        tensors = [_read(conn, dtype, shape) for dtype, shape in specs]
    states = tensors[3] if len(tensors) > 3 else None
    videos = tuple(tensors[2].split_with_sizes(lengths))
    return WorkerAnswer(tensors[0], tensors[1], videos, states, instructions)


def worker_main(
    conn: Connection, factory: EpisodeEnvFactory, spec: EnvSpec, num_slots: int, shared: torch.Tensor | None = None
) -> None:
    """Serve ("reset", [(slot, (task, trial))]) and ("step", [(slot, chunk)]) until ("close", None) or EOF.

    Answers with `send_answers` (into `shared`, a uint8 shared-memory buffer, when they fit) or ("error",
    traceback); the first message is ("ready", None) once the envs are built.
    """
    torch.set_num_threads(1)  # one core per worker; env stepping is Python-bound
    runners = [EpisodeRunner(factory(), spec) for _ in range(num_slots)]
    conn.send(("ready", None))
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):
            break
        if command == "close":
            break
        try:
            if command == "reset":
                resets = cast("list[tuple[int, tuple[int, int]]]", payload)
                answers = [runners[slot].reset(task, trial) for slot, (task, trial) in resets]
            else:
                steps = cast("list[tuple[int, list[list[int]]]]", payload)
                answers = [runners[slot].step(chunk) for slot, chunk in steps]
        except Exception:
            conn.send(("error", traceback.format_exc()))
            continue
        send_answers(conn, answers, shared)
    for runner in runners:
        runner.env.close()
