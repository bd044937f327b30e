"""The two seams of embodied RL: a batched async `VectorEnv` and a `VideoEmbedder` of episode videos."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

from rl_core.envs._types import EnvObservation, EnvSpec

FRAMES_INPUT = "frames"
"""`VideoEmbedder.input_kind` of an embedder of frame videos (T_i, C, H, W) uint8 (the default)."""
STATE_INPUT = "state"
"""`input_kind` of an embedder of privileged-state trajectories (T_i, Z) float32 (the oracle)."""


@runtime_checkable
class VectorEnv(Protocol):
    """N environments stepped together. Methods are async; blocking work runs off the event loop.

    `reset(task_ids, trial_ids)` resets envs 0..len(task_ids)-1 to those (task, trial) initial states.
    `step(indices, actions)` runs, for each addressed env, a chunk of K env steps: `actions` is (N, K, D) int64 bin
    indices in [0, action_bins); an env that finishes inside the chunk ignores the rest of it (its `finish_step`
    counts executed steps). Both answer an `EnvObservation` in request order.
    """

    @property
    def spec(self) -> EnvSpec: ...

    @property
    def num_envs(self) -> int: ...

    async def reset(self, task_ids: Sequence[int], trial_ids: Sequence[int]) -> EnvObservation: ...

    async def step(self, indices: Sequence[int], actions: torch.Tensor) -> EnvObservation: ...

    def close(self) -> None: ...


@runtime_checkable
class VideoEmbedder(Protocol):
    """Embeds whole episode videos into vectors whose distances measure task progress (SRPO's world model).

    `embed(videos)`: B tensors (T_i, C, H, W) uint8 -> (B, dim) float32; an empty video (T_i == 0) gives a zero
    vector ("invalid", siiRL's convention). An embedder may declare `input_kind = STATE_INPUT`, in which case its
    "videos" are (T_i, Z) float32 privileged-state trajectories instead (see `embedder_input_kind`).
    """

    @property
    def dim(self) -> int: ...

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor: ...


def embedder_input_kind(embedder: VideoEmbedder) -> str:
    """`FRAMES_INPUT` or `STATE_INPUT`: what the embedder's `embed` takes (frames unless it declares otherwise)."""
    kind = getattr(embedder, "input_kind", FRAMES_INPUT)
    return kind if isinstance(kind, str) else FRAMES_INPUT
