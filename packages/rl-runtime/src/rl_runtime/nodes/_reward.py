"""The `compute_reward` operation: the task (and any model-based reward) scores every response; the score sits on
its last response token."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rl_core.schema import INPUT_IDS, PROMPT_LEN, RESPONSE_LEN, RESPONSE_MASK, UID
from rl_core.shaping import overlong_penalty, scores_to_token_level
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import require_fields, single_input, with_fields
from rl_runtime.nodes._model_rewards import model_scores
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._rollout_batch import FINISH_REASON_KEY
from rl_runtime.nodes._task import ResponseSample, Task
from rl_runtime.nodes._trajectory_batch import WORKFLOW_KEYS, WORKFLOW_REWARD_KEY
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = (INPUT_IDS, RESPONSE_MASK, PROMPT_LEN, RESPONSE_LEN, UID)


def task_scores(task: Task, data: StepData) -> tuple[torch.Tensor, dict[str, float]]:
    """`(B,)` float32 scores the task gives `data`'s responses, and the task's metrics."""
    batch = data.batch
    samples = []
    prompt_lens, response_lens = batch[PROMPT_LEN].tolist(), batch[RESPONSE_LEN].tolist()
    names = [name for name in data.extras if name != FINISH_REASON_KEY and name not in WORKFLOW_KEYS]
    for row, uid in enumerate(batch[UID].tolist()):
        ids = batch[INPUT_IDS][row].tolist()
        start, end = prompt_lens[row], prompt_lens[row] + response_lens[row]
        extras = {name: data.extras[name][row] for name in names}
        finish = data.extras[FINISH_REASON_KEY][row] if FINISH_REASON_KEY in data.extras else "stop"
        samples.append(ResponseSample(uid, tuple(ids[:start]), tuple(ids[start:end]), finish, extras))
    result = task.score(samples)
    if len(result.scores) != len(samples):
        raise StepDataError(f"the task returned {len(result.scores)} scores for {len(samples)} responses")
    return torch.tensor(result.scores, dtype=torch.float32), dict(result.metrics)


def episode_scores(task: Task, data: StepData) -> tuple[torch.Tensor, dict[str, float]]:
    """`(B,)` float32 scores: a workflow's own reward where its trajectory has one (`Trajectory.reward`), the
    task's score elsewhere (every row of the single-turn path), and the metrics."""
    rewards = data.extras.get(WORKFLOW_REWARD_KEY)
    if rewards is None or any(reward is None for reward in rewards):
        scores, metrics = task_scores(task, data)
    else:
        scores, metrics = torch.zeros(data.num_samples, dtype=torch.float32), {}
    if rewards is not None:
        own = [row for row, reward in enumerate(rewards) if reward is not None]
        scores[own] = torch.tensor([float(rewards[row]) for row in own], dtype=torch.float32)
        metrics["reward/workflow_scored_frac"] = len(own) / max(1, len(rewards))
    return scores, metrics


def sequence_scores(res: NodeResources, data: StepData, node: str = "") -> tuple[torch.Tensor, dict[str, float]]:
    """`(B,)` float32 sequence scores of `data`'s responses and their metrics: `algorithm.rule_reward_weight` x the
    task's (or a workflow's) score, plus the weighted model-based rewards (`reward_model`, `judge`), plus overlong
    shaping when configured. `node` names the calling node in errors."""
    rule_weight = res.config.algorithm.rule_reward_weight
    if rule_weight > 0:
        scores, metrics = episode_scores(res.task, data)
        if rule_weight != 1:
            scores = rule_weight * scores
    else:  # replaced by the model-based rewards (the config refuses 0 without one)
        scores, metrics = torch.zeros(data.num_samples, dtype=torch.float32), {}
    if res.config.reward_model is not None or res.config.judge is not None:
        model, model_metrics = model_scores(res, data, node)
        if model is not None:
            scores = scores + model
            metrics.update(model_metrics)
    overlong = res.config.algorithm.overlong
    if overlong is not None:
        penalty = overlong_penalty(
            data.batch[RESPONSE_LEN],
            max_response_length=res.config.data.max_response_length,
            buffer_length=overlong.buffer_length,
            penalty_factor=overlong.penalty_factor,
        ).to(torch.float32)
        scores = scores + penalty
        metrics["reward/overlong_penalty_mean"] = penalty.mean().item()
    return scores, metrics


def score_batch(res: NodeResources, data: StepData, node: str) -> StepData:
    """`data` with `token_level_scores` `(B, T)` added and the reward metrics (timing included)."""
    require_fields(data, _NEEDS, node)
    metrics: dict[str, float] = {}
    with timed("reward", metrics):
        scores, task_metrics = sequence_scores(res, data, node)
        token_level_scores = scores_to_token_level(scores, data.batch[RESPONSE_MASK])
    return with_fields(data, {**task_metrics, **metrics}, token_level_scores=token_level_scores)


@register_operation("compute_reward")
def compute_reward(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `token_level_scores` `(B, T)`: each response's score on its last response token."""
    return score_batch(ctx.resources, single_input(ctx, inputs), ctx.node.id)
