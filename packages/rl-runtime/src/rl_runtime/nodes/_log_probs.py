"""The `compute_old_log_prob`, `compute_ref_log_prob` and `compute_value` operations: forward passes, no update."""

from __future__ import annotations

from collections.abc import Mapping

from rl_runtime.config import BatchConfig
from rl_runtime.metrics import timed
from rl_runtime.nodes._batching import micro_batches, require_fields, single_input, with_fields
from rl_runtime.nodes._resources import resources_of
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = ("input_ids", "attention_mask", "response_mask")
ROLLOUT_PROBS_DIFF_MEAN = "training/rollout_probs_diff_mean"
ROLLOUT_PROBS_DIFF_MAX = "training/rollout_probs_diff_max"


def is_on_policy(batch: BatchConfig) -> bool:
    """Whether each step makes exactly one optimizer update, from the weights that generated its samples."""
    return batch.ppo_epochs == 1 and batch.mini_batches_per_step == 1


@register_operation("compute_old_log_prob")
def compute_old_log_prob(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Adds `old_log_probs` `(B, T)`: the current policy's log-probs of the responses (and its entropy metric).

    An on-policy step (one mini-batch, one PPO epoch) passes the batch on unchanged: its single update starts
    from the weights that sampled, so the actor takes the detached log-probs of its own training forward as
    the old ones (as verl's actor does) and this extra forward pass would compute the same numbers.
    """
    res = resources_of(ctx)
    data = single_input(ctx, inputs)
    if is_on_policy(res.config.batch):
        return with_fields(data)
    require_fields(data, _NEEDS, ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("old_log_prob", metrics):
        rows = micro_batches(data.batch["attention_mask"], res.config.batch.max_tokens_per_micro_batch, res.group)
        output = res.actor.compute_log_probs(data.batch, rows, with_entropy=True)
        mask = data.batch["response_mask"].bool()
        metrics["actor/entropy"] = (output.entropy[mask].mean().item()) if mask.any() else 0.0
        if "rollout_log_probs" in data.batch and mask.any():
            # The rollout engine and the trainer must agree on each token's probability; a gap means stale
            # weights, a temperature mismatch or numerics worth a look (verl's training/rollout_probs_diff).
            gap = (output.log_probs.exp() - data.batch["rollout_log_probs"].exp()).abs()[mask]
            metrics[ROLLOUT_PROBS_DIFF_MEAN] = gap.mean().item()
            metrics[ROLLOUT_PROBS_DIFF_MAX] = gap.max().item()
    return with_fields(data, metrics, old_log_probs=output.log_probs)


@register_operation("compute_ref_log_prob")
def compute_ref_log_prob(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Adds `ref_log_probs` `(B, T)` under the frozen reference policy; passes the batch on when the run has no KL."""
    res = resources_of(ctx)
    data = single_input(ctx, inputs)
    if res.reference is None:
        return with_fields(data)
    require_fields(data, _NEEDS, ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("ref", metrics):
        rows = micro_batches(data.batch["attention_mask"], res.config.batch.max_tokens_per_micro_batch, res.group)
        ref_log_probs = res.reference.compute_ref_log_probs(data.batch, rows)
    return with_fields(data, metrics, ref_log_probs=ref_log_probs)


@register_operation("compute_value")
def compute_value(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Adds the critic's `values` `(B, T)`."""
    res = resources_of(ctx)
    data = single_input(ctx, inputs)
    if res.critic is None:
        raise StepDataError(f"node {ctx.node.id!r} computes values but the run has no critic; add a critic section")
    require_fields(data, _NEEDS, ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("values", metrics):
        rows = micro_batches(data.batch["attention_mask"], res.config.batch.max_tokens_per_micro_batch, res.group)
        values = res.critic.compute_values(data.batch, rows)
    return with_fields(data, metrics, values=values)
