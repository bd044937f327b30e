"""The embodied operations of `embodied_srpo`: rollout in an environment, the accuracy band, the SRPO reward.

    embodied_rollout    this rank's (task, trial) prompts, `batch.samples_per_prompt` episodes each (contiguous),
                        the VLA acting on the env chunk by chunk; every episode's video embedded
    embodied_sampling   keep the groups whose success rate lies in `algorithm.embodied_sampling`'s band
    embodied_reward     SRPO: 1 for a success, a progress reward in (0, 0.6) for a failure by its video embedding's
                        distance to the same task's successes (`algorithm.reward=binary`: 0/1), on the last valid
                        action token as `token_level_scores`

The advantages (`compute_advantage`, GRPO by `group_id`) and the actor update (`train_actor`) are the text
pipelines' operations: the response mask is the finish-step mask, so they see only executed action tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import torch

from rl_core.schema import GROUP_ID, RESPONSE_MASK
from rl_core.shaping import accuracy_band_mask, scores_to_token_level, srpo_progress_reward
from rl_runtime.config import RewardKind
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import require_fields, single_input, with_fields
from rl_runtime.nodes._embodied_batch import (
    EMBEDDING_KEY,
    FAILED_KEY,
    SUCCESS_KEY,
    TASK_ID_KEY,
    TRUNCATED_KEY,
    build_episode_batch,
)
from rl_runtime.nodes._episodes import ActionPolicy, Episode, InstructionEncoder, run_episodes
from rl_runtime.nodes._generate import put_rollout_to_sleep
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._rollout_batch import select_samples
from rl_runtime.nodes._seeds import sample_seed, sample_uid
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

TASK_ID_COLUMN = "task_id"
"""Prompt rows of an embodied run: `{"task_id": int, "trial_id": int}`."""
TRIAL_ID_COLUMN = "trial_id"
ENCODE_INSTRUCTION = "encode_instruction"
"""The task method an embodied run needs: instruction text -> token ids."""


def require_policy(res: NodeResources, node: str) -> ActionPolicy:
    """The rollout engine as an action policy; a StepDataError naming `node` otherwise."""
    if not isinstance(res.rollout, ActionPolicy):
        found = type(res.rollout).__name__
        raise StepDataError(
            f"node {node!r} needs a rollout engine that acts on observations (act(input_ids, attention_mask, "
            f"pixel_values, temperature, generator)), found {found}; set rollout.engine to a VLA engine"
        )
    return res.rollout


def instruction_encoder(res: NodeResources, node: str) -> InstructionEncoder:
    """The task's `encode_instruction`; a StepDataError naming `node` when the task has none."""
    encode: object = getattr(res.task, ENCODE_INSTRUCTION, None)
    if not callable(encode):
        raise StepDataError(
            f"node {node!r} needs a task with {ENCODE_INSTRUCTION}(text) -> token ids (the VLA's instruction "
            f"tokenizer), found {type(res.task).__name__}; use an embodied task factory"
        )
    return cast("InstructionEncoder", encode)


def prompt_rows(rows: Sequence[Mapping[str, object]], where: Sequence[str]) -> tuple[list[int], list[int]]:
    """Task and trial ids of the prompt rows; a StepDataError names a row without int `task_id`/`trial_id`."""
    tasks, trials = [], []
    for row, place in zip(rows, where, strict=True):
        values = [row.get(TASK_ID_COLUMN), row.get(TRIAL_ID_COLUMN)]
        if not all(isinstance(value, int) and not isinstance(value, bool) for value in values):
            raise StepDataError(
                f"{place}: an embodied prompt row needs int fields {TASK_ID_COLUMN!r} and {TRIAL_ID_COLUMN!r}, "
                f"got {dict(row)!r}"
            )
        tasks.append(int(values[0]))  # type: ignore[arg-type]
        trials.append(int(values[1]))  # type: ignore[arg-type]
    return tasks, trials


def embed_videos(res: NodeResources, episodes: Sequence[Episode]) -> torch.Tensor:
    """`(B, dim)` float32 embeddings of the episodes' videos; zeros (invalid) without an embedder."""
    if res.embedder is None:
        return torch.zeros((len(episodes), 1), dtype=torch.float32)
    embeddings = res.embedder.embed([episode.full_video() for episode in episodes])
    if embeddings.shape != (len(episodes), res.embedder.dim):
        raise StepDataError(
            f"the video embedder returned shape {tuple(embeddings.shape)}; its dim says ({len(episodes)}, "
            f"{res.embedder.dim}): fix the embedder's dim or its output"
        )
    return embeddings


def rollout_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Success rate, mean episode length, env failures and rollout-bound truncations of a batch of episodes."""
    count = max(len(episodes), 1)
    return {
        "rollout/success_rate": sum(e.complete and not e.failed for e in episodes) / count,
        "rollout/finish_step_mean": sum(e.finish_step for e in episodes) / count,
        "rollout/env_failures": float(sum(e.failed for e in episodes)),
        "rollout/policy_step_truncations": float(sum(e.truncated for e in episodes)),
    }


@register_operation("embodied_rollout")
async def embodied_rollout(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """This rank's (task, trial) prompts, each run `batch.samples_per_prompt` times in a row; the batch of
    `build_episode_batch` with `group_id` shared by a prompt's episodes (GRPO's groups)."""
    res, node = ctx.resources, ctx.node.id
    env, policy, encode = res.require_env(node), require_policy(res, node), instruction_encoder(res, node)
    if res.prompts is None:
        raise StepDataError(f"node {node!r} has no prompt loader on this worker; keep it in the rollout sub-graph")
    metrics: dict[str, float] = {"rollout/policy_version": float(res.policy_version)}
    config, n = res.config, res.config.batch.samples_per_prompt
    with timed("gen", metrics):
        batch = next(res.prompts)
        tasks, trials = prompt_rows(batch.rows, [res.prompts.source.where(i) for i in batch.indices])
        generator = torch.Generator().manual_seed(sample_seed(config.trainer.seed, ctx.step, ctx.dp.rank))
        episodes = await run_episodes(
            env,
            policy,
            encode,
            [task for task in tasks for _ in range(n)],
            [trial for trial in trials for _ in range(n)],
            temperature=config.rollout.temperature,
            generator=generator,
            max_policy_steps=env.spec.max_steps,
        )
        with timed("embed", metrics):
            embeddings = embed_videos(res, episodes)
        data = build_episode_batch(
            episodes,
            embeddings,
            action_dims=env.spec.action_dims,
            uids=[sample_uid(ctx.step, ctx.dp.rank, 0, i) for i in range(len(episodes))],
            group_ids=[sample_uid(ctx.step, ctx.dp.rank, 0, i // n) for i in range(len(episodes))],
            policy_version=res.policy_version,
        )
    if hasattr(res.rollout, "capabilities"):  # an InferenceEngine-style policy may sleep while the actor trains
        put_rollout_to_sleep(res)
    metrics.update(rollout_metrics(episodes))
    return StepData(data.batch, data.extras, metrics)


def _flags(data: StepData, key: str, node: str) -> torch.Tensor:
    if key not in data.extras:
        raise StepDataError(f"node {node!r} needs the extras {key!r} of embodied_rollout; found {sorted(data.extras)}")
    return torch.tensor([bool(value) for value in data.extras[key]], dtype=torch.bool)


@register_operation("embodied_sampling")
def embodied_sampling(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Keeps the groups whose success rate lies in `algorithm.embodied_sampling`'s [lower, upper] (and, with
    `filter_truncated`, only groups without truncated episodes). When no group qualifies the whole batch passes:
    its groups' advantages are all zero, so the update changes nothing, and the step keeps its shape."""
    res, data, node = ctx.resources, single_input(ctx, inputs), ctx.node.id
    settings = res.config.algorithm.embodied_sampling
    if settings is None:
        raise StepDataError(f"node {node!r} filters by success rate but algorithm.embodied_sampling is null; set it")
    require_fields(data, (GROUP_ID,), node)
    success = _flags(data, SUCCESS_KEY, node)
    groups = data.batch[GROUP_ID]
    keep = accuracy_band_mask(success, groups, lower=settings.lower, upper=settings.upper)
    if settings.filter_truncated:
        truncated = _flags(data, TRUNCATED_KEY, node)
        keep &= ~accuracy_band_mask(truncated, groups, lower=1e-9, upper=1.0)
    kept_groups = len(set(groups[keep].tolist()))
    metrics = {
        "embodied_sampling/kept_ratio": float(keep.double().mean()),
        "embodied_sampling/kept_groups": float(kept_groups),
        "embodied_sampling/num_groups": float(len(set(groups.tolist()))),
    }
    if kept_groups == 0:
        return StepData(data.batch, data.extras, metrics)
    kept = select_samples(data, keep.nonzero().flatten())
    return StepData(kept.batch, kept.extras, metrics)


def episode_scores(data: StepData, reward: RewardKind, node: str) -> torch.Tensor:
    """`(B,)` float32 sequence rewards: binary success, or SRPO's progress reward grouped by task."""
    success = _flags(data, SUCCESS_KEY, node) & ~_flags(data, FAILED_KEY, node)
    if reward is RewardKind.BINARY:
        return success.to(torch.float32)
    if reward is not RewardKind.SRPO:
        raise StepDataError(
            f"node {node!r} scores episodes: algorithm.reward must be srpo or binary, got {reward.value}"
        )
    if EMBEDDING_KEY not in data.extras or TASK_ID_KEY not in data.extras:
        raise StepDataError(f"node {node!r} needs the extras {EMBEDDING_KEY!r} and {TASK_ID_KEY!r} of embodied_rollout")
    embeddings = torch.stack([torch.as_tensor(e, dtype=torch.float32) for e in data.extras[EMBEDDING_KEY]])
    tasks = torch.tensor([int(task) for task in data.extras[TASK_ID_KEY]], dtype=torch.int64)
    return srpo_progress_reward(success, embeddings, tasks).to(torch.float32)


@register_operation("embodied_reward")
def embodied_reward(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `token_level_scores` (B, S*A): each episode's reward (`algorithm.reward`: srpo or binary) on its last
    valid action token, `finish_step * D - 1`."""
    res, data, node = ctx.resources, single_input(ctx, inputs), ctx.node.id
    require_fields(data, (RESPONSE_MASK,), node)
    metrics: dict[str, float] = {}
    with timed("reward", metrics):
        scores = episode_scores(data, res.config.algorithm.reward, node)
        success = _flags(data, SUCCESS_KEY, node)
        failures = scores[~success]
        metrics["reward/success_rate"] = float(success.double().mean())
        metrics["reward/failure_reward_mean"] = float(failures.mean()) if failures.numel() else 0.0
        metrics["reward/shaped_failures"] = float((failures > 0).sum())
        token_level = scores_to_token_level(scores, data.batch[RESPONSE_MASK])
    return with_fields(data, metrics, token_level_scores=token_level)
