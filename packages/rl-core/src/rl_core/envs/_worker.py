"""The body of an `EnvPool` worker process and the packing of its answers for the pipe."""

from __future__ import annotations

import traceback
from multiprocessing.connection import Connection
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory, EpisodeRunner, SlotAnswer
from rl_core.envs._types import EnvSpec

Packed = tuple[torch.Tensor, torch.Tensor, list[int], list[tuple[str, bool, bool, int]], "torch.Tensor | None"]
"""(frames (N, C, H, W), videos concatenated (sum T, C, H, W), lengths, (instruction, active, complete, finish_step)
per env, states (N, Z) or None): a few tensors per answer instead of several per env, since each pickled tensor
costs a fixed overhead."""


def pack(answers: list[SlotAnswer]) -> Packed:
    """Pack a worker's answers into few tensors for the pipe."""
    states = [a.state for a in answers]
    stacked = torch.stack([s for s in states if s is not None]) if all(s is not None for s in states) else None
    return (
        torch.stack([a.frame for a in answers]),
        torch.cat([a.video for a in answers]),
        [a.video.shape[0] for a in answers],
        [(a.instruction, a.active, a.complete, a.finish_step) for a in answers],
        stacked,
    )


def unpack(packed: Packed) -> list[SlotAnswer]:
    """Invert `pack`."""
    frames, videos, lengths, meta, states = packed
    parts = torch.split(videos, lengths)
    return [
        SlotAnswer(frames[i], m[0], m[1], m[2], m[3], parts[i], None if states is None else states[i])
        for i, m in enumerate(meta)
    ]


def worker_main(conn: Connection, factory: EpisodeEnvFactory, spec: EnvSpec, num_slots: int) -> None:
    """Serve ("reset", [(slot, (task, trial))]) and ("step", [(slot, chunk)]) until ("close", None) or EOF.

    Answers ("ok", Packed) or ("error", traceback); the first message is ("ready", None) once the envs are built.
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
            conn.send(("ok", pack(answers)))
        except Exception:
            conn.send(("error", traceback.format_exc()))
    for runner in runners:
        runner.env.close()
