"""The `compute_old_log_prob`, `compute_ref_log_prob` and `compute_value` operations: forward passes, no update."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from rl_core.schema import RESPONSE_MASK, ROLLOUT_LOG_PROBS, VALUES
from rl_engines.training import Batch, ForwardOutput
from rl_runtime.config import BatchConfig, KLMode, RecomputeOldLogProb, RunConfig
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import policy_inputs, require_fields, single_input, with_fields
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = (RESPONSE_MASK,)
ROLLOUT_PROBS_DIFF_MEAN = "training/rollout_probs_diff_mean"
ROLLOUT_PROBS_DIFF_MAX = "training/rollout_probs_diff_max"


def is_on_policy(batch: BatchConfig) -> bool:
    """Whether each step makes exactly one optimizer update, from the weights that generated its samples."""
    return batch.ppo_epochs == 1 and batch.mini_batches_per_step == 1


def skips_old_log_prob_pass(config: RunConfig) -> bool:
    """Whether `compute_old_log_prob` leaves the old log-probs to the actor update's own training forward.

    Under `algorithm.recompute_old_log_prob=auto`, when the step is on-policy (`is_on_policy`) and the KL does
    not enter the reward (`compute_advantage` would read `old_log_probs` before the update).
    """
    algorithm = config.algorithm
    return (
        algorithm.recompute_old_log_prob is RecomputeOldLogProb.AUTO
        and is_on_policy(config.batch)
        and algorithm.kl.mode is not KLMode.IN_REWARD
    )


def forward_field(value: torch.Tensor | None, name: str) -> torch.Tensor:
    """A `ForwardOutput` field that the forward's `ForwardSpec` asked for."""
    if value is None:
        raise StepDataError(f"the forward returned no {name}; its ForwardSpec must ask for it")
    return value


def policy_forward_metrics(output: ForwardOutput, batch: Batch, rows: torch.Tensor | None = None) -> dict[str, float]:
    """`actor/entropy` and verl's `training/rollout_probs_diff_*` of a forward of the current policy.

    Args:
        output: the forward's `(B, T)` `log_probs` and `entropy`.
        batch: the rows it ran on: `response_mask` `(B, T)`, and `rollout_log_probs` `(B, T)` when the rollout
            recorded them.
        rows: `(B,)` bool, the rows to cover (the trained rows, when the update skipped the others); None covers all.
            With `rows` and no response token among them the metrics are NaN (the driver's reduction skips them).
    """
    mask = batch[RESPONSE_MASK].bool()
    if rows is not None:
        mask = mask & rows.unsqueeze(-1)
    if not mask.any():
        return {"actor/entropy": 0.0 if rows is None else math.nan}
    metrics = {"actor/entropy": forward_field(output.entropy, "entropy")[mask].mean().item()}
    if ROLLOUT_LOG_PROBS in batch:
        # The rollout engine and the trainer must agree on each token's probability; a gap means stale
        # weights, a temperature mismatch or numerics worth a look (verl's training/rollout_probs_diff).
        gap = (forward_field(output.log_probs, "log_probs").exp() - batch[ROLLOUT_LOG_PROBS].exp()).abs()[mask]
        metrics[ROLLOUT_PROBS_DIFF_MEAN] = gap.mean().item()
        metrics[ROLLOUT_PROBS_DIFF_MAX] = gap.max().item()
    return metrics


@register_operation("compute_old_log_prob")
def compute_old_log_prob(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `old_log_probs` `(B, T)`: the current policy's log-probs of the responses (and its entropy metric).

    When `skips_old_log_prob_pass` (an on-policy step under `algorithm.recompute_old_log_prob=auto`) the batch
    passes on unchanged: its single update starts from the weights that sampled, so `train_actor` takes the
    detached log-probs of its own training forward as the old ones, and the same metrics from that forward.
    """
    res = ctx.resources
    data = single_input(ctx, inputs)
    if skips_old_log_prob_pass(res.config):
        return with_fields(data)
    require_fields(data, (*policy_inputs(data), *_NEEDS), ctx.node.id)
    actor = res.require_actor(ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("old_log_prob", metrics):
        output = actor.compute_log_probs(data.batch, with_entropy=True)
        metrics.update(policy_forward_metrics(output, data.batch))
    return with_fields(data, metrics, old_log_probs=forward_field(output.log_probs, "log_probs"))


@register_operation("compute_ref_log_prob")
def compute_ref_log_prob(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `ref_log_probs` `(B, T)` under the frozen reference policy; passes the batch on when the run has no KL."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    if res.reference is None:
        return with_fields(data)
    require_fields(data, (*policy_inputs(data), *_NEEDS), ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("ref", metrics):
        ref_log_probs = res.reference.compute_ref_log_probs(data.batch)
    return with_fields(data, metrics, ref_log_probs=ref_log_probs)


@register_operation("compute_value")
def compute_value(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds the critic's `values` `(B, T)`."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    if res.critic is None:
        raise StepDataError(f"node {ctx.node.id!r} computes values but the run has no critic; add a critic section")
    require_fields(data, (*policy_inputs(data), *_NEEDS), ctx.node.id)
    metrics: dict[str, float] = {}
    with timed(VALUES, metrics):
        values = res.critic.compute_values(data.batch)
    return with_fields(data, metrics, values=values)
