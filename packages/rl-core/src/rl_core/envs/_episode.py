"""One environment's episode bookkeeping, shared by the in-process `LocalVectorEnv` and the `EnvPool` workers.

An `EpisodeEnv` is a single, blocking environment (a simulator adapter); `EpisodeRunner` turns it into the contract's
semantics: chunks of K steps, truncation at `max_steps`, `finish_step` counting executed steps, the frames seen since
the last answer. `SlotAnswer`s are plain tuples of tensors and scalars so they travel cheaply between processes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

from rl_core.envs._types import EnvObservation, EnvSpec


@dataclass(frozen=True)
class EnvTick:
    """What one blocking env answers after a reset or a step."""

    frame: torch.Tensor
    """(C, H, W) uint8 frame the policy sees next."""
    done: bool = False
    """The episode ended (success or the env's own termination)."""
    success: bool = False
    """The task was achieved."""
    instruction: str = ""
    """Language instruction (read after a reset)."""
    state: torch.Tensor | None = None
    """(Z,) float32 privileged state features, if the env has any."""


class EpisodeEnv(Protocol):
    """A single blocking environment: `reset(task_id, trial_id)` and `step(action)` with D bin indices."""

    def reset(self, task_id: int, trial_id: int) -> EnvTick: ...

    def step(self, action: Sequence[int]) -> EnvTick: ...

    def close(self) -> None: ...


EpisodeEnvFactory = Callable[[], EpisodeEnv]
"""Builds one `EpisodeEnv`; for an `EnvPool` it must pickle (a module-level function or a `functools.partial`)."""


class SlotAnswer(NamedTuple):
    """One env's part of an `EnvObservation`."""

    frame: torch.Tensor  # (C, H, W) uint8
    instruction: str
    active: bool
    complete: bool
    finish_step: int
    video: torch.Tensor  # (T, C, H, W) uint8
    state: torch.Tensor | None  # (Z,) float32


class EpisodeRunner:
    """Runs episodes of one `EpisodeEnv` with the contract's chunk, truncation and finish-step rules."""

    def __init__(self, env: EpisodeEnv, spec: EnvSpec) -> None:
        self.env = env
        self._spec = spec
        self._frame = torch.zeros(spec.image_shape, dtype=torch.uint8)
        self._instruction = ""
        self._state: torch.Tensor | None = None
        self._active = False
        self._complete = False
        self._steps = 0

    def reset(self, task_id: int, trial_id: int) -> SlotAnswer:
        """Start the (task, trial) episode; the answer's video is the first frame."""
        tick = self.env.reset(task_id, trial_id)
        self._frame, self._instruction, self._state = tick.frame, tick.instruction, tick.state
        self._active, self._complete, self._steps = True, False, 0
        return self._answer(tick.frame.unsqueeze(0))

    def step(self, chunk: Sequence[Sequence[int]]) -> SlotAnswer:
        """Execute a chunk of K actions (each D bins) until the episode ends; an ended episode ignores the chunk."""
        frames: list[torch.Tensor] = []
        for action in chunk:
            if not self._active:
                break
            tick = self.env.step(action)
            self._steps += 1
            self._frame, self._state = tick.frame, tick.state
            frames.append(tick.frame)
            if tick.success:
                self._complete = True
            if tick.done or tick.success or self._steps >= self._spec.max_steps:
                self._active = False
        video = torch.stack(frames) if frames else torch.zeros((0, *self._spec.image_shape), dtype=torch.uint8)
        return self._answer(video)

    def _answer(self, video: torch.Tensor) -> SlotAnswer:
        return SlotAnswer(self._frame, self._instruction, self._active, self._complete, self._steps, video, self._state)


def assemble(indices: Sequence[int], answers: Sequence[SlotAnswer], failed: Sequence[bool]) -> EnvObservation:
    """Stack per-env answers (request order) into one `EnvObservation`."""
    states = [a.state for a in answers]
    state = None
    if states and all(s is not None for s in states):
        state = torch.stack([s for s in states if s is not None]).float()
    return EnvObservation(
        indices=tuple(indices),
        frames=torch.stack([a.frame for a in answers]),
        instructions=tuple(a.instruction for a in answers),
        active=torch.tensor([a.active for a in answers], dtype=torch.bool),
        complete=torch.tensor([a.complete for a in answers], dtype=torch.bool),
        finish_step=torch.tensor([a.finish_step for a in answers], dtype=torch.int64),
        failed=torch.tensor(list(failed), dtype=torch.bool),
        video=tuple(a.video for a in answers),
        state=state,
    )
