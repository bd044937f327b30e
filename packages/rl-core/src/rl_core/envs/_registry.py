"""The env and video-embedder registries: plain dicts filled by decorators, plus the checked builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rl_core._registry import lookup, registrar
from rl_core.envs._protocols import STATE_INPUT, VectorEnv, VideoEmbedder, embedder_input_kind
from rl_core.envs._types import EmbedderConfig, EnvConfig, EnvConfigError, EnvSpec

EnvFactory = Callable[[EnvConfig], VectorEnv]
"""`factory(config) -> VectorEnv`; it validates `config` (tasks, options) before starting any worker."""

VideoEmbedderFactory = Callable[[EmbedderConfig], VideoEmbedder]
"""`factory(config) -> VideoEmbedder`."""

ENVIRONMENTS: dict[str, EnvFactory] = {}
"""Env factories by name (rl-recipes registers "babyai" and "libero")."""

VIDEO_EMBEDDERS: dict[str, VideoEmbedderFactory] = {}
"""Video embedder factories by name ("pixel_pyramid", "privileged_state" in rl-core; "vjepa2" in rl-engines)."""

register_environment = registrar(ENVIRONMENTS, "environment")
register_video_embedder = registrar(VIDEO_EMBEDDERS, "video embedder")


def check_env_config(config: EnvConfig) -> None:
    """Raise `EnvConfigError` naming the field (also as its `field`) unless `config`'s counts and timeout are ones
    every env runs with (`num_envs`, `max_steps`, `num_trials` >= 1, `num_workers` >= 0, `step_timeout_s` > 0). The
    env's own factory checks the rest (its name, tasks and options) when `make_env` builds it."""
    for name in ("num_envs", "max_steps", "num_trials"):
        value = getattr(config, name)
        if value < 1:
            raise EnvConfigError(f"env.{name} must be >= 1, got {value}; set env.{name} to a positive int", field=name)
    if config.num_workers < 0:
        raise EnvConfigError(
            f"env.num_workers must be >= 0 (0 = in-process), got {config.num_workers}; set it to 0 or more",
            field="num_workers",
        )
    if not config.step_timeout_s > 0:
        raise EnvConfigError(
            f"env.step_timeout_s must be > 0, got {config.step_timeout_s}; set a positive timeout",
            field="step_timeout_s",
        )


def make_env(config: EnvConfig) -> VectorEnv:
    """Build the env registered under `config.name` (`check_env_config` first); an unknown name raises
    `UnknownNameError` listing valid ones."""
    check_env_config(config)
    return lookup(ENVIRONMENTS, config.name, "environment")(config)


def make_video_embedder(config: EmbedderConfig, spec: EnvSpec | None = None) -> VideoEmbedder:
    """Build the embedder registered under `config.name` and check it before any rollout.

    With `spec`, a one-frame probe video of `spec.image_shape` must embed to `(1, dim)`; with `config.dim` set, the
    embedder's `dim` must equal it. Either mismatch raises `EnvConfigError` naming the field and the fix.
    """
    embedder = lookup(VIDEO_EMBEDDERS, config.name, "video embedder")(config)
    if config.dim is not None and embedder.dim != config.dim:
        raise EnvConfigError(
            f"embedder.dim: expected {config.dim} (the configured dimension), but embedder {config.name!r} produces "
            f"{embedder.dim}; set embedder.dim to {embedder.dim} or leave it unset"
        )
    if spec is not None and embedder_input_kind(embedder) != STATE_INPUT:
        probe = torch.zeros((1, *spec.image_shape), dtype=torch.uint8)
        out = embedder.embed([probe])
        if tuple(out.shape) != (1, embedder.dim):
            raise EnvConfigError(
                f"embedder {config.name!r}: a (1, {', '.join(map(str, spec.image_shape))}) video embedded to "
                f"{tuple(out.shape)}, expected (1, {embedder.dim}); the embedder's dim does not match its output, "
                "fix the embedder or its options"
            )
    return embedder


def check_reset_args(spec: EnvSpec, num_envs: int, task_ids: Sequence[int], trial_ids: Sequence[int]) -> None:
    """Raise `EnvConfigError` unless `task_ids`/`trial_ids` are equally long, fit `num_envs` and lie in range."""
    if len(task_ids) != len(trial_ids):
        raise EnvConfigError(
            f"reset: task_ids has {len(task_ids)} entries but trial_ids has {len(trial_ids)}; pass one trial per task"
        )
    if not 0 < len(task_ids) <= num_envs:
        raise EnvConfigError(
            f"reset: expected 1..{num_envs} (task, trial) pairs (env.num_envs), got {len(task_ids)}; "
            "raise env.num_envs or reset fewer envs"
        )
    for task in task_ids:
        if not 0 <= task < len(spec.task_names):
            raise EnvConfigError(
                f"reset: task_id {task} out of range for env {spec.name!r}, which has {len(spec.task_names)} tasks "
                f"{spec.task_names}; use a task_id in [0, {len(spec.task_names)}) or add the task to env.tasks"
            )
    for trial in trial_ids:
        if not 0 <= trial < spec.num_trials:
            raise EnvConfigError(
                f"reset: trial_id {trial} out of range for env {spec.name!r}: expected [0, {spec.num_trials}) "
                f"(env.num_trials); raise env.num_trials or use a smaller trial_id"
            )


def check_step_args(spec: EnvSpec, num_envs: int, indices: Sequence[int], actions: torch.Tensor) -> None:
    """Raise `EnvConfigError` unless `actions` is (len(indices), K, D) int64 in [0, action_bins) over valid slots."""
    if actions.dim() != 3 or actions.shape[0] != len(indices) or actions.shape[2] != spec.action_dims:
        raise EnvConfigError(
            f"step: actions must be (N={len(indices)}, K, D={spec.action_dims}) bin indices, got "
            f"{tuple(actions.shape)}; pass one (K, D) chunk per addressed env"
        )
    if actions.dtype != torch.int64:
        raise EnvConfigError(f"step: actions must be int64 bin indices, got {actions.dtype}; cast with .long()")
    if actions.numel() and (int(actions.min()) < 0 or int(actions.max()) >= spec.action_bins):
        raise EnvConfigError(
            f"step: action bins must lie in [0, {spec.action_bins}) (spec.action_bins), got "
            f"[{int(actions.min())}, {int(actions.max())}]; map actions through the env's bins"
        )
    if len(set(indices)) != len(indices) or any(not 0 <= i < num_envs for i in indices):
        raise EnvConfigError(
            f"step: indices must be distinct env slots in [0, {num_envs}), got {list(indices)}; address each env once"
        )
