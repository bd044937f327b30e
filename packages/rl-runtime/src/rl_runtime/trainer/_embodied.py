"""Embodied runs: the driver's checks before any worker starts, each rollout worker's env and embedder, and
validation by episodes (success rate overall and per task)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import torch

from rl_coordinator.loading import RowSource
from rl_core.envs import EnvSpec, VectorEnv, VideoEmbedder, make_env, make_video_embedder
from rl_engines.vla import OpenVLASpec, VLAError, check_policy_matches_env
from rl_runtime.config import RunConfig
from rl_runtime.evaluation._evaluate import SUM_KEYS
from rl_runtime.nodes import NodeResources
from rl_runtime.nodes._embodied import instruction_encoder, prompt_rows, require_policy
from rl_runtime.nodes._episodes import run_episodes
from rl_runtime.nodes._seeds import sample_seed
from rl_runtime.trainer._errors import TrainerError

VALIDATION_NODE = "validation"
"""How the embodied checks name validation in their errors."""
TASK_EPISODES = "task_{task}/episodes"
"""Validation sums per task: episodes run and episodes that succeeded (`reduce_validation` turns them into
`val/success_rate/task_{task}`)."""
TASK_SUCCESSES = "task_{task}/successes"
_ACTION_SPACE = ("action_bins", "action_dims", "image_shape")
_EMBODIED_VALIDATION_TAG = 0xE7B0D1ED


def check_embodied_run(config: RunConfig, policy_config: Any) -> EnvSpec | None:
    """Before any worker starts: build the env once in this process (its factory checks the tasks and options),
    the embedder against its frames, and compare the policy's action head with the env's action space. Returns the
    env's spec (None for a run without an env). `policy_config` is the actor's VLA config (`actor_hf_config`: a tiny
    VLA's config, or an OpenVLA-OFT checkpoint's `OpenVLASpec`); the action chunk is the policy's choice, its bins
    and dims must be the env's. Raises TrainerError naming the setting and the fix."""
    if config.env is None:
        return None
    probe = dataclasses.replace(config.env, num_envs=1, num_workers=0)
    try:
        env = make_env(probe)
    except Exception as error:  # the factory's own error names the bad field; say which section it came from
        raise TrainerError(f"env: {error}") from error
    try:
        spec = env.spec
    finally:
        env.close()
    if config.embedder is not None:
        try:
            make_video_embedder(config.embedder, spec)
        except Exception as error:
            raise TrainerError(f"embedder: {error}") from error
    if isinstance(policy_config, OpenVLASpec):  # its frames are resized to the backbones': channels only
        try:
            check_policy_matches_env(policy_config, spec)
        except VLAError as error:
            raise TrainerError(f"actor.model: {error}") from error
        return spec
    missing = [name for name in _ACTION_SPACE if not hasattr(policy_config, name)]
    if missing:
        raise TrainerError(
            f"actor.model: an embodied run needs a VLA policy (model_type tiny_vla or openvla) whose config has "
            f"{list(_ACTION_SPACE)}, found a {type(policy_config).__name__} without {missing}; point actor.model at a "
            "VLA folder"
        )
    for name in _ACTION_SPACE:
        mine, theirs = getattr(policy_config, name), getattr(spec, name)
        if (tuple(mine) if name == "image_shape" else mine) != theirs:
            raise TrainerError(
                f"actor.model: the VLA's {name}={mine} does not match env {spec.name!r}'s {name}={theirs}; build the "
                "model for this env or pick the env it was trained for"
            )
    return spec


def build_env_side(config: RunConfig) -> tuple[VectorEnv | None, VideoEmbedder | None]:
    """This rollout worker's env (its own pool of `env.num_workers` workers) and video embedder."""
    if config.env is None:
        return None, None
    env = make_env(config.env)
    embedder = make_video_embedder(config.embedder, env.spec) if config.embedder is not None else None
    return env, embedder


def evaluate_episodes(res: NodeResources, source: RowSource, rank: int, world_size: int) -> dict[str, float]:
    """`rollout.val_samples_per_prompt` episodes per held-out (task, trial) row of this worker's share (rows `rank`,
    `rank + world_size`, ...) at `rollout.val_temperature`; the validation sums (`SUM_KEYS`: an episode scores 1
    for a success, a row's best is 1 when any of its episodes succeeded) plus per-task counts."""
    sums: dict[str, float] = dict.fromkeys(SUM_KEYS, 0.0)
    indices = list(range(rank, len(source), world_size))
    if not indices:
        return sums
    env = res.require_env(VALIDATION_NODE)
    policy, encode = require_policy(res, VALIDATION_NODE), instruction_encoder(res, VALIDATION_NODE)
    rows, trials = prompt_rows(source.rows(indices), [source.where(i) for i in indices])
    k = res.config.rollout.val_samples_per_prompt
    tasks = [task for task in rows for _ in range(k)]
    generator = torch.Generator().manual_seed(sample_seed(res.config.trainer.seed, _EMBODIED_VALIDATION_TAG, rank))
    episodes = asyncio.run(
        run_episodes(
            env,
            policy,
            encode,
            tasks,
            [trial for trial in trials for _ in range(k)],
            temperature=res.config.rollout.val_temperature,
            generator=generator,
            max_policy_steps=env.spec.max_steps,
        )
    )
    wins = [float(episode.complete and not episode.failed) for episode in episodes]
    best = [max(wins[row * k : row * k + k]) for row in range(len(rows))]
    sums.update(
        num_prompts=float(len(rows)),
        num_samples=float(len(episodes)),
        score_sum=sum(wins),
        best_sum=sum(best),
        pass_count=sum(best),
        response_tokens=float(sum(episode.finish_step * env.spec.action_dims for episode in episodes)),
    )
    for task, win in zip(tasks, wins, strict=True):
        for key, value in ((TASK_EPISODES, 1.0), (TASK_SUCCESSES, win)):
            name = key.format(task=task)
            sums[name] = sums.get(name, 0.0) + value
    return sums
