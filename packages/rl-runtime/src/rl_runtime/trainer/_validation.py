"""Validation: each worker evaluates its share of the held-out prompts (`rl_runtime.evaluation`, the one
evaluation path); the driver turns the sums into metrics with `reduce_validation`.

Reported (verl's `mean@k` / `best@k` spirit): `val/reward/mean@k` (mean score over every sample),
`val/reward/best@k` (mean over prompts of the best of k scores), `val/pass@k` (share of prompts with a sample
scoring at least `PASS_SCORE`) and `val/response_length/mean`.
"""

from __future__ import annotations

from rl_coordinator.loading import RowSource
from rl_engines.rollout import SamplingParams
from rl_runtime.evaluation import PASS_SCORE, evaluate_prompts
from rl_runtime.evaluation._evaluate import SUM_KEYS, reduce_validation
from rl_runtime.nodes import NodeResources
from rl_runtime.nodes._generate import response_budget
from rl_runtime.nodes._prompt_table import encode_rows
from rl_runtime.nodes._seeds import sample_seed, sample_uid
from rl_runtime.workers import StepDataError

__all__ = ["PASS_SCORE", "evaluate_shard", "reduce_validation"]

VALIDATION_SEED_TAG = 0x5EED_7A1
"""Mixed into validation seeds so they never coincide with a training draw's."""


def evaluate_shard(res: NodeResources, source: RowSource, rank: int, world_size: int) -> dict[str, float]:
    """Sums over this worker's held-out prompts (rows `rank`, `rank + world_size`, ...), for `reduce_validation`."""
    config = res.config
    indices = list(range(rank, len(source), world_size))
    if not indices:
        return dict.fromkeys(SUM_KEYS, 0.0)
    items = encode_rows(
        res.task, source.rows(indices), [source.where(i) for i in indices], config.data.max_prompt_length
    )
    rollout = res.rollout
    if rollout is None:
        raise StepDataError("validation samples on the rollout slots; this worker holds no rollout engine")
    if "sleep" in rollout.capabilities and rollout.status().state == "asleep":
        rollout.wake_up()
    sampling = SamplingParams(
        max_new_tokens=response_budget(config),
        temperature=config.rollout.val_temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )
    evaluation = evaluate_prompts(
        rollout,
        res.task,
        items,
        samples_per_prompt=config.rollout.val_samples_per_prompt,
        sampling=sampling,
        seed_of=lambda index: sample_seed(config.trainer.seed, VALIDATION_SEED_TAG, rank, index),
        uid_of=lambda index: sample_uid(0, rank, 0, index),
    )
    return evaluation.sums()
