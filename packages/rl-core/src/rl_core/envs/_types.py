"""The value types of the environment seam: what an env is (`EnvSpec`), how to build one (`EnvConfig`) and what it
answers (`EnvObservation`), plus the errors an env raises.

Torch and the standard library only, so any framework can implement or consume the seam.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from rl_core._errors import RLCoreError


class EnvError(RLCoreError, RuntimeError):
    """An environment could not do what was asked at run time (a worker that cannot start, a closed env)."""


class EnvConfigError(RLCoreError, ValueError):
    """An environment or embedder was asked for something it does not have (unknown task, trial out of range,
    wrong embedding dimension); raised before any worker starts, naming the field and the fix."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        """`field`: the `EnvConfig` field at fault, when one is (a config loader files the problem under it)."""
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class EnvSpec:
    """What a `VectorEnv` looks like to a policy: frame shape, action space, episode length and its task table."""

    name: str
    """Registered env name, e.g. "babyai"."""
    image_shape: tuple[int, int, int]
    """(C, H, W) of one uint8 frame."""
    action_dims: int
    """D: numbers per env step (BabyAI: 1; LIBERO: 7)."""
    action_bins: int
    """Bins per action dim (BabyAI: the number of discrete actions used, e.g. 3; LIBERO: 256)."""
    max_steps: int
    """Env steps per episode before truncation."""
    task_names: tuple[str, ...]
    """Index = task_id; each name is the source of that task's language instruction."""
    num_trials: int
    """Fixed initial states per task (LIBERO's trials; BabyAI: seeds per task); trial_id lies in [0, num_trials)."""


@dataclass(frozen=True)
class EnvConfig:
    """How to build a registered `VectorEnv` (the argument of an `EnvFactory`).

    `tasks` empty means the env's default task list. `num_workers` 0 runs the envs in this process (tests, the
    benchmark baseline); > 0 runs them in that many subprocess workers, each step bounded by `step_timeout_s`.
    `options` carries env-specific settings (BabyAI: `num_actions`, `tile_size`; LIBERO: `assets_dir`, ...); an
    env refuses an option it does not know.
    """

    name: str = "babyai"
    """A registered env name (`ENVIRONMENTS`)."""
    tasks: tuple[str, ...] = ()
    """The env's task names (BabyAI levels, LIBERO tasks); empty: the env's default list."""
    num_envs: int = 8
    """Envs stepped together (episodes run in waves of this many)."""
    max_steps: int = 64
    """Env steps per episode before truncation."""
    num_trials: int = 16
    """Fixed initial states per task (trial_id lies in [0, num_trials))."""
    seed: int = 0
    """Seed of the trials' initial states."""
    num_workers: int = 0
    """Subprocess workers stepping the envs; 0 steps them in this process."""
    step_timeout_s: float = 30.0
    """A worker that does not answer a step within this is restarted and its episodes marked failed."""
    options: Mapping[str, object] = field(default_factory=lambda: dict[str, object]())
    """Env-specific settings; an env refuses one it does not know."""


@dataclass(frozen=True)
class EnvObservation:
    """The answer of `reset`/`step` for the N envs addressed, in request order."""

    indices: tuple[int, ...]
    """Env slots (0..num_envs-1)."""
    frames: torch.Tensor
    """(N, C, H, W) uint8: the frame the policy sees next."""
    instructions: tuple[str, ...]
    """(N,) language instruction of each env's task."""
    active: torch.Tensor
    """(N,) bool: episode still running."""
    complete: torch.Tensor
    """(N,) bool: task succeeded."""
    finish_step: torch.Tensor
    """(N,) int64: env steps taken when the episode ended (else steps so far)."""
    failed: torch.Tensor
    """(N,) bool: the env's worker crashed or timed out; the episode ended as a failure."""
    video: tuple[torch.Tensor, ...]
    """(N,) each (T_i, C, H, W) uint8: frames seen since the last answer (reset: the first frame)."""
    state: torch.Tensor | None = None
    """(N, Z) float32 privileged state features (for the oracle embedder), if the env has any."""


@dataclass(frozen=True)
class EmbedderConfig:
    """How to build a registered `VideoEmbedder`.

    `dim` (when set) is the output dimension the caller expects; a mismatch is refused when the embedder is built.
    `path` is a local model folder for learned embedders (never downloaded). `options` carries embedder-specific
    settings.
    """

    name: str = "pixel_pyramid"
    """A registered embedder name (`VIDEO_EMBEDDERS`)."""
    path: str | None = None
    """Local model folder of a learned embedder; never downloaded."""
    num_frames: int = 8
    """Frames sampled from each video (by linspace)."""
    dim: int | None = None
    """The output dimension expected; null accepts the embedder's own."""
    device: str = "cpu"
    """Where a learned embedder runs."""
    options: Mapping[str, object] = field(default_factory=lambda: dict[str, object]())
    """Embedder-specific settings."""
