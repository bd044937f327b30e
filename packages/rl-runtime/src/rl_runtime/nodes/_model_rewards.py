"""Model-based sequence rewards for the reward node: a reward model's and a generative judge's weighted scores.

The runtime knows tokens, the task knows text: with `reward_model.tokenizer: same` the reward model reads the
batch's own prompt and response ids; with `retokenize` the task decodes them and the reward model encodes the
text with its own tokenizer.
"""

from __future__ import annotations

import torch

from rl_core.schema import INPUT_IDS, PROMPT_LEN, RESPONSE_LEN
from rl_engines.judge import GenerativeJudge
from rl_engines.reward_model import RewardScorer, TokenizerMode
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._generate import SLEEP_LEVEL
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._task import Task
from rl_runtime.workers import StepData, StepDataError

MODEL_METRIC_PREFIX = "reward/model_"
"""The reward model's metrics: `reward/model_mean`, `_std`, `_min`, `_max`, `_truncated_frac`."""
JUDGE_METRIC_PREFIX = "reward/judge_"
"""The judge's metrics: `reward/judge_mean`, `_std`, `_min`, `_max`, `_unparsed_frac`."""


def prompt_response_ids(data: StepData) -> list[tuple[list[int], list[int]]]:
    """Each row's (prompt ids, response ids), cut from `input_ids` by `prompt_len` and `response_len`."""
    batch = data.batch
    prompt_lens, response_lens = batch[PROMPT_LEN].tolist(), batch[RESPONSE_LEN].tolist()
    rows = []
    for row, ids in enumerate(batch[INPUT_IDS].tolist()):
        start, end = prompt_lens[row], prompt_lens[row] + response_lens[row]
        rows.append((ids[:start], ids[start:end]))
    return rows


def summary_metrics(prefix: str, scores: torch.Tensor) -> dict[str, float]:
    """Mean, std, min and max of the `(B,)` `scores`, named `<prefix>mean` etc."""
    if scores.numel() == 0:
        return {}
    std = scores.std(unbiased=False).item() if scores.numel() > 1 else 0.0
    return {
        f"{prefix}mean": scores.mean().item(),
        f"{prefix}std": std,
        f"{prefix}min": scores.min().item(),
        f"{prefix}max": scores.max().item(),
    }


def reward_model_scores(scorer: RewardScorer, task: Task, data: StepData) -> tuple[torch.Tensor, dict[str, float]]:
    """`(B,)` float32 scores the reward model gives `data`'s responses (unweighted) and its metrics: one scoring
    call for the whole batch (with `reward_model.placement: slot`, one call to the reward model's slot)."""
    rows = prompt_response_ids(data)
    if scorer.config.tokenizer is TokenizerMode.SAME:
        result = scorer.score_ids([prompt + response for prompt, response in rows])
    else:
        prompts = [task.decode(prompt) for prompt, _ in rows]
        responses = [task.decode(response) for _, response in rows]
        result = scorer.score_texts(prompts, responses)
    metrics = summary_metrics(MODEL_METRIC_PREFIX, result.scores)
    metrics[f"{MODEL_METRIC_PREFIX}truncated_frac"] = result.truncated / max(1, len(rows))
    return result.scores, metrics


def judge_scores(res: NodeResources, judge: GenerativeJudge, data: StepData) -> tuple[torch.Tensor, dict[str, float]]:
    """`(B,)` float32 verdicts the judge gives `data`'s responses (unweighted) and its metrics. The run's own
    rollout engine, put to sleep after generation when colocated, is woken for the judge and put back."""
    rows = prompt_response_ids(data)
    prompts = [res.task.decode(prompt) for prompt, _ in rows]
    responses = [res.task.decode(response) for _, response in rows]
    engine = judge.engine
    asleep = engine is res.rollout and res.config.placement.colocate and "sleep" in engine.capabilities
    if asleep:
        engine.wake_up()
    try:
        result = judge.score(prompts, responses)
    finally:
        if asleep:
            engine.sleep(SLEEP_LEVEL)
    metrics = summary_metrics(JUDGE_METRIC_PREFIX, result.scores)
    metrics[f"{JUDGE_METRIC_PREFIX}unparsed_frac"] = result.unparsed / max(1, len(rows))
    return result.scores, metrics


def _missing(node: str, what: str) -> StepDataError:
    return StepDataError(
        f"node {node!r} scores with the {what}, which this worker does not hold; under split placement keep the "
        "reward node in the rollout part of the pipeline"
    )


def model_scores(res: NodeResources, data: StepData, node: str) -> tuple[torch.Tensor | None, dict[str, float]]:
    """The weighted sum of the configured model-based rewards' `(B,)` scores (None when none is configured), and
    their metrics (timings included)."""
    total: torch.Tensor | None = None
    metrics: dict[str, float] = {}
    if res.config.reward_model is not None:
        if res.reward_model is None:
            raise _missing(node, "reward model")
        with timed("reward_model", metrics):
            scores, found = reward_model_scores(res.reward_model, res.task, data)
        total = res.config.reward_model.weight * scores
        metrics.update(found)
    if res.config.judge is not None:
        if res.judge is None:
            raise _missing(node, "judge")
        with timed("judge", metrics):
            scores, found = judge_scores(res, res.judge, data)
        weighted = res.config.judge.weight * scores
        total = weighted if total is None else total + weighted
        metrics.update(found)
    return total, metrics
