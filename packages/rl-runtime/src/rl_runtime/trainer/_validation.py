"""Validation: each worker samples its share of the held-out prompts; the driver turns the sums into metrics.

Reported (verl's `mean@k` / `best@k` spirit): `val/reward/mean@k` (mean score over every sample),
`val/reward/best@k` (mean over prompts of the best of k scores), `val/pass@k` (share of prompts with a sample
scoring at least `PASS_SCORE`) and `val/response_length/mean`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rl_coordinator.loading import RowSource
from rl_engines.rollout import SamplingParams
from rl_runtime.nodes import NodeResources, encode_rows, response_budget, sample_prompts, task_scores
from rl_runtime.workers import StepDataError

PASS_SCORE = 1.0
"""A sample passes when its score reaches this: a rule reward gives 1 for a correct answer."""
VALIDATION_SEED_TAG = 0x5EED_7A1
"""Mixed into validation seeds so they never coincide with a training draw's."""
_SUM_KEYS = ("num_prompts", "num_samples", "score_sum", "best_sum", "pass_count", "response_tokens")


def evaluate_shard(res: NodeResources, source: RowSource, rank: int, world_size: int) -> dict[str, float]:
    """Sums over this worker's held-out prompts (rows `rank`, `rank + world_size`, ...), for `reduce_validation`."""
    config = res.config
    indices = list(range(rank, len(source), world_size))
    sums: dict[str, float] = dict.fromkeys(_SUM_KEYS, 0.0)
    if not indices:
        return sums
    items = encode_rows(
        res.task, source.rows(indices), [source.where(i) for i in indices], config.data.max_prompt_length
    )
    rollout = res.rollout
    if rollout is None:
        raise StepDataError("validation samples on the rollout slots; this worker holds no rollout engine")
    if "sleep" in rollout.capabilities and rollout.status().state == "asleep":
        rollout.wake_up()
    k = config.rollout.val_samples_per_prompt
    sampling = SamplingParams(
        max_new_tokens=response_budget(config),
        temperature=config.rollout.val_temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )
    data = sample_prompts(
        rollout,
        items,
        k,
        sampling,
        seed_parts=(config.trainer.seed, VALIDATION_SEED_TAG, rank),
        uid_of=(0, rank, 0),
        policy_version=res.policy_version,
    )
    scores, _ = task_scores(res.task, data)
    per_prompt = scores.view(len(items), k)
    best = per_prompt.max(dim=1).values
    sums.update(
        num_prompts=float(len(items)),
        num_samples=float(scores.numel()),
        score_sum=float(scores.sum()),
        best_sum=float(best.sum()),
        pass_count=float((best >= PASS_SCORE).sum()),
        response_tokens=float(data.batch["response_len"].sum()),
    )
    return sums


def reduce_validation(per_rank: Sequence[Mapping[str, float]], k: int) -> dict[str, float]:
    """The validation metrics from every worker's `evaluate_shard` sums."""
    total = {key: math.fsum(rank[key] for rank in per_rank) for key in _SUM_KEYS}
    prompts, samples = total["num_prompts"], total["num_samples"]
    if prompts == 0:
        return {}
    return {
        f"val/reward/mean@{k}": total["score_sum"] / samples,
        f"val/reward/best@{k}": total["best_sum"] / prompts,
        f"val/pass@{k}": total["pass_count"] / prompts,
        "val/response_length/mean": total["response_tokens"] / samples,
        "val/num_prompts": prompts,
    }
