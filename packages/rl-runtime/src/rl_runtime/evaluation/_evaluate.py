"""One evaluation path: sample each prompt `samples_per_prompt` times through a rollout engine, let the task score
every response, and read the metrics off the scores.

The Trainer's validation (`rl_runtime.trainer._validation.evaluate_shard`: each worker its share of the held-out
prompts, `reduce_validation` on the driver) and the recipes' held-out scoring (`rl_recipes.evaluation.evaluate_math`:
SFT's exact match, `rl-recipes eval`) both run `evaluate_prompts` and report from the `Evaluation` it returns.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence

import attrs
import torch

from rl_engines.rollout import GenerateRequest, InferenceEngine, SamplingParams
from rl_runtime.evaluation._pass_at_k import pass_at_k
from rl_runtime.nodes import PromptItem, ResponseSample, Task
from rl_runtime.workers import StepDataError

PASS_SCORE = 1.0
"""A response passes (is correct) when its score reaches this: a rule reward gives 1 for a correct answer."""
_TASK_SUM = re.compile(r"task_(?P<task>\d+)/(?P<what>episodes|successes)")
"""Per-task sums of an embodied validation (`rl_runtime.trainer` embodied evaluation)."""
SUM_KEYS = ("num_prompts", "num_samples", "score_sum", "best_sum", "pass_count", "response_tokens")
"""The additive totals of `Evaluation.sums`, which `reduce_validation` adds up over workers."""


@attrs.frozen
class Evaluation:
    """The scored responses of one evaluation, prompt-major: responses `i * n` to `i * n + n - 1` (with
    `n = samples_per_prompt`) answer prompt `i`."""

    samples_per_prompt: int
    response_ids: tuple[tuple[int, ...], ...]
    """Each response's token ids."""
    scores: tuple[float, ...]
    """The task's score of each response."""
    task_metrics: Mapping[str, float] = attrs.field(factory=dict)
    """The task's own metrics of the scoring (failure counts, format rates, ...)."""

    @property
    def num_prompts(self) -> int:
        """Prompts evaluated."""
        return len(self.scores) // self.samples_per_prompt

    def prompt_scores(self, prompt: int) -> tuple[float, ...]:
        """The scores of prompt `prompt`'s responses."""
        start = prompt * self.samples_per_prompt
        return self.scores[start : start + self.samples_per_prompt]

    def num_correct(self, prompt: int) -> int:
        """How many of prompt `prompt`'s responses reach `PASS_SCORE`."""
        return sum(score >= PASS_SCORE for score in self.prompt_scores(prompt))

    @property
    def mean_score(self) -> float:
        """The score averaged over every response (exact match for a 0/1 reward)."""
        return sum(self.scores) / len(self.scores)

    def pass_at_k(self, k: int) -> float:
        """The unbiased pass@k (Chen et al. 2021) averaged over prompts; `1 <= k <= samples_per_prompt`."""
        passes = [pass_at_k(self.samples_per_prompt, self.num_correct(i), k) for i in range(self.num_prompts)]
        return sum(passes) / len(passes)

    def sums(self) -> dict[str, float]:
        """The additive totals (`SUM_KEYS`) that `reduce_validation` turns into validation metrics.

        Scores are summed as float32, the dtype of a step's scores, so validation and training agree."""
        sums: dict[str, float] = dict.fromkeys(SUM_KEYS, 0.0)
        if not self.scores:
            return sums
        scores = torch.tensor(self.scores, dtype=torch.float32)
        best = scores.view(self.num_prompts, self.samples_per_prompt).max(dim=1).values
        sums.update(
            num_prompts=float(self.num_prompts),
            num_samples=float(scores.numel()),
            score_sum=float(scores.sum()),
            best_sum=float(best.sum()),
            pass_count=float((best >= PASS_SCORE).sum()),
            response_tokens=float(sum(len(ids) for ids in self.response_ids)),
        )
        return sums


def _identity(index: int) -> int:
    return index


def evaluate_prompts(
    engine: InferenceEngine,
    task: Task,
    items: Sequence[PromptItem],
    *,
    samples_per_prompt: int,
    sampling: SamplingParams,
    seed_of: Callable[[int], int | None],
    uid_of: Callable[[int], int] = _identity,
    rid_of: Callable[[int], str] | None = None,
) -> Evaluation:
    """Sample each of `items` `samples_per_prompt` times in one `generate` call and score every response with `task`.

    Args:
        engine: the rollout engine, left running.
        task: encodes nothing here (the items are encoded) and scores the responses (`Task.score`).
        items: the prompts, with the extras their scoring needs (ground truth, ...).
        samples_per_prompt: responses per prompt (k of mean@k and pass@k).
        sampling: every request's sampling, except its seed.
        seed_of: the seed of response `index` (`i * samples_per_prompt + j`, the j-th response to prompt i);
            None uses the engine's shared generator.
        uid_of: the uid the task sees for response `index`.
        rid_of: the engine request id of response `index`; None is `str(uid_of(index))`.
    """
    requests, samples_of = [], []
    for i, item in enumerate(items):
        for j in range(samples_per_prompt):
            index = i * samples_per_prompt + j
            params = dataclasses.replace(sampling, seed=seed_of(index))
            rid = str(uid_of(index)) if rid_of is None else rid_of(index)
            requests.append(GenerateRequest(rid, item.prompt_ids, params, return_logprobs=False))
            samples_of.append(item)
    if not requests:
        return Evaluation(samples_per_prompt, (), ())
    outputs = engine.generate(requests)
    names = sorted({name for item in items for name in item.extras})
    samples = [
        ResponseSample(
            uid_of(index),
            item.prompt_ids,
            tuple(output.output_ids),
            output.finish_reason,
            {name: item.extras.get(name) for name in names},
        )
        for index, (item, output) in enumerate(zip(samples_of, outputs, strict=True))
    ]
    result = task.score(samples)
    if len(result.scores) != len(samples):
        raise StepDataError(f"the task returned {len(result.scores)} scores for {len(samples)} responses")
    return Evaluation(
        samples_per_prompt,
        tuple(sample.response_ids for sample in samples),
        tuple(float(score) for score in result.scores),
        dict(result.metrics),
    )


def reduce_validation(per_rank: Sequence[Mapping[str, float]], k: int) -> dict[str, float]:
    """The validation metrics from every worker's `Evaluation.sums`, in verl's `mean@k` / `best@k` spirit.

    `val/reward/mean@k` (mean score over every sample), `val/reward/best@k` (mean over prompts of the best of k
    scores), `val/pass@k` (share of prompts with a sample scoring at least `PASS_SCORE`: pass@k with n = k),
    `val/response_length/mean` and `val/num_prompts`; empty when no worker had a prompt.
    """
    total = {key: math.fsum(rank[key] for rank in per_rank) for key in SUM_KEYS}
    prompts, samples = total["num_prompts"], total["num_samples"]
    if prompts == 0:
        return {}
    metrics = {
        f"val/reward/mean@{k}": total["score_sum"] / samples,
        f"val/reward/best@{k}": total["best_sum"] / prompts,
        f"val/pass@{k}": total["pass_count"] / prompts,
        "val/response_length/mean": total["response_tokens"] / samples,
        "val/num_prompts": prompts,
    }
    metrics.update(_per_task_success(per_rank))
    return metrics


def _per_task_success(per_rank: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """`val/success_rate/task_<t>` from embodied validation's `task_<t>/episodes` and `task_<t>/successes` sums."""
    episodes: dict[str, float] = {}
    successes: dict[str, float] = {}
    for rank in per_rank:
        for key, value in rank.items():
            match = _TASK_SUM.fullmatch(key)
            if match is not None:
                into = episodes if match["what"] == "episodes" else successes
                into[match["task"]] = into.get(match["task"], 0.0) + value
    return {
        f"val/success_rate/task_{task}": successes.get(task, 0.0) / count
        for task, count in sorted(episodes.items(), key=lambda item: int(item[0]))
        if count
    }
