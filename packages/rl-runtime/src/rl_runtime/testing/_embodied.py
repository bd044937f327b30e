"""Test doubles of the embodied seam: a corridor `VectorEnv`, a last-frame embedder, a random action policy and a
word task, for testing embodied operations and configs without a simulator or a VLA.

Not the real BabyAI env or VLA (rl-recipes and rl-engines own those); small enough to reason about by hand.
`register_embodied_doubles()` registers the env and the embedder under `CORRIDOR` and `LAST_FRAME`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_core.envs import (
    ENVIRONMENTS,
    VIDEO_EMBEDDERS,
    EmbedderConfig,
    EnvConfig,
    EnvConfigError,
    EnvObservation,
    EnvSpec,
    check_reset_args,
    register_environment,
    register_video_embedder,
)
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

CORRIDOR = "corridor_double"
"""Registered name of `CorridorEnv`."""
LAST_FRAME = "last_frame_double"
"""Registered name of `LastFrameEmbedder`."""
LEFT, STAY, RIGHT = 0, 1, 2
WIDTH = 6


class CorridorEnv:
    """Test double of a VectorEnv: an agent on a line of `WIDTH` cells; task t's goal is cell 2 + t; trial k starts
    at cell k % 2. Bins 0/1/2 move left/stay/right; reaching the goal completes the episode. A frame is (3, 2, WIDTH)
    with 255 at the agent's cell in channel 0 and at the goal in channel 1."""

    def __init__(self, config: EnvConfig) -> None:
        tasks = config.tasks or ("reach 2", "reach 3")
        unknown = [task for task in tasks if task not in ("reach 2", "reach 3")]
        if unknown:
            raise EnvConfigError(f"env.tasks: unknown tasks {unknown}; the corridor has 'reach 2' and 'reach 3'")
        self._spec = EnvSpec(CORRIDOR, (3, 2, WIDTH), 1, 3, config.max_steps, tuple(tasks), config.num_trials)
        self._num_envs = config.num_envs
        self.pos = [0] * config.num_envs
        self.goal = [0] * config.num_envs
        self.steps = [0] * config.num_envs
        self.done = [True] * config.num_envs
        self.success = [False] * config.num_envs
        self.closed = False

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def num_envs(self) -> int:
        return self._num_envs

    def _frame(self, slot: int) -> torch.Tensor:
        frame = torch.zeros((3, 2, WIDTH), dtype=torch.uint8)
        frame[0, :, self.pos[slot]] = 255
        frame[1, :, self.goal[slot]] = 255
        return frame

    def _answer(self, indices: Sequence[int], videos: list[torch.Tensor]) -> EnvObservation:
        return EnvObservation(
            indices=tuple(indices),
            frames=torch.stack([self._frame(i) for i in indices]),
            instructions=tuple(f"go to cell {self.goal[i]}" for i in indices),
            active=torch.tensor([not self.done[i] for i in indices]),
            complete=torch.tensor([self.success[i] for i in indices]),
            finish_step=torch.tensor([self.steps[i] for i in indices], dtype=torch.int64),
            failed=torch.zeros(len(indices), dtype=torch.bool),
            video=tuple(videos),
        )

    async def reset(self, task_ids: Sequence[int], trial_ids: Sequence[int]) -> EnvObservation:
        check_reset_args(self._spec, self._num_envs, task_ids, trial_ids)
        for slot, (task, trial) in enumerate(zip(task_ids, trial_ids, strict=True)):
            self.pos[slot], self.goal[slot] = trial % 2, 2 + task
            self.steps[slot], self.done[slot], self.success[slot] = 0, False, False
        slots = range(len(task_ids))
        return self._answer(slots, [self._frame(i)[None] for i in slots])

    async def step(self, indices: Sequence[int], actions: torch.Tensor) -> EnvObservation:
        videos = []
        for slot, chunk in zip(indices, actions, strict=True):
            frames = []
            for action in chunk[:, 0].tolist():
                if self.done[slot]:
                    break
                self.pos[slot] = min(max(self.pos[slot] + action - 1, 0), WIDTH - 1)
                self.steps[slot] += 1
                self.success[slot] = self.pos[slot] == self.goal[slot]
                self.done[slot] = self.success[slot] or self.steps[slot] >= self._spec.max_steps
                frames.append(self._frame(slot))
            videos.append(torch.stack(frames) if frames else torch.zeros((0, 3, 2, WIDTH), dtype=torch.uint8))
        return self._answer(indices, videos)

    def close(self) -> None:
        self.closed = True


class LastFrameEmbedder:
    """Test double of a VideoEmbedder: the last frame, flattened, as float (an empty video: zeros)."""

    def __init__(self, config: EmbedderConfig) -> None:
        self.size = 3 * 2 * WIDTH

    @property
    def dim(self) -> int:
        return self.size

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        rows = [v[-1].flatten().float() if v.shape[0] else torch.zeros(self.size) for v in videos]
        return torch.stack(rows)


def register_embodied_doubles() -> None:
    """Register `CorridorEnv` as `CORRIDOR` and `LastFrameEmbedder` as `LAST_FRAME` (once; later calls do nothing)."""
    if CORRIDOR not in ENVIRONMENTS:
        register_environment(CORRIDOR)(CorridorEnv)
    if LAST_FRAME not in VIDEO_EMBEDDERS:
        register_video_embedder(LAST_FRAME)(LastFrameEmbedder)


class RandomPolicy:
    """Test double of a VLA rollout policy: uniform bins from the generator, chunk size `chunk`."""

    def __init__(self, chunk: int = 2, bins: int = 3) -> None:
        self.chunk, self.bins = chunk, bins
        self.calls = 0

    def act(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        size = input_ids.shape[0]
        bins = torch.randint(0, self.bins, (size, self.chunk, 1), generator=generator)
        return bins, torch.full((size, self.chunk), -math.log(self.bins))


class WordTask:
    """Test double of an embodied task: instruction words -> ids by a growing vocabulary."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode_instruction(self, text: str) -> tuple[int, ...]:
        return tuple(self.vocab.setdefault(word, len(self.vocab) + 1) for word in text.split())

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        return PromptItem(())

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(0.0 for _ in samples))

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""
