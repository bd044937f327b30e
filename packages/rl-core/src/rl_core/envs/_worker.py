"""The body of an `EnvPool` worker process and the transfer of its answers over the pipe.

An answer travels as a small pickled header followed by each tensor's raw bytes (`send_bytes`, read into a fresh
buffer with `recv_bytes_into`). Pickling a tensor for a `multiprocessing` pipe instead moves it into a new shared
memory segment whose file descriptor the receiver fetches over a socket from the sender's resource-sharer thread:
a connection and a round trip to the worker per tensor, every step, which made the pool's main process spend more
time receiving frames than the workers spent stepping envs on a busy machine.
"""

from __future__ import annotations

import ctypes
import math
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory, EpisodeRunner, SlotAnswer
from rl_core.envs._types import EnvSpec

AnswerHeader = tuple[list[tuple[torch.dtype, tuple[int, ...]]], list[int], list[tuple[str, bool, bool, int]]]
"""(dtype and shape of each tensor that follows: frames (N, C, H, W), videos concatenated (sum T, C, H, W), then
states (N, Z) when every env has them; video lengths; (instruction, active, complete, finish_step) per env)."""


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


def send_answers(conn: Connection, answers: Sequence[SlotAnswer]) -> None:
    """Send a worker's answers: ("ok", `AnswerHeader`), then the raw bytes of each tensor it lists."""
    states = [a.state for a in answers]
    tensors = [torch.stack([a.frame for a in answers]), torch.cat([a.video for a in answers])]
    if all(s is not None for s in states):
        tensors.append(torch.stack(cast("list[torch.Tensor]", states)))
    tensors = [t.contiguous() for t in tensors]
    meta = [(a.instruction, a.active, a.complete, a.finish_step) for a in answers]
    header: AnswerHeader = ([(t.dtype, tuple(t.shape)) for t in tensors], [a.video.shape[0] for a in answers], meta)
    conn.send(("ok", header))
    for tensor in tensors:
        conn.send_bytes(_raw(tensor))


def receive_answers(conn: Connection, header: AnswerHeader) -> list[SlotAnswer]:
    """Read the tensors that follow `header` on `conn` and rebuild the worker's answers (inverts `send_answers`)."""
    specs, lengths, meta = header
    tensors = [_read(conn, dtype, shape) for dtype, shape in specs]
    frames, videos = tensors[0], tensors[1]
    states = tensors[2] if len(tensors) > 2 else None
    parts = torch.split(videos, lengths)
    return [
        SlotAnswer(frames[i], m[0], m[1], m[2], m[3], parts[i], None if states is None else states[i])
        for i, m in enumerate(meta)
    ]


def worker_main(conn: Connection, factory: EpisodeEnvFactory, spec: EnvSpec, num_slots: int) -> None:
    """Serve ("reset", [(slot, (task, trial))]) and ("step", [(slot, chunk)]) until ("close", None) or EOF.

    Answers with `send_answers` or ("error", traceback); the first message is ("ready", None) once the envs are built.
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
        send_answers(conn, answers)
    for runner in runners:
        runner.env.close()
