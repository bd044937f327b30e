"""The `train_actor` and `train_critic` operations: the role's update, then the actor's weights go to the rollout;
and `receive_weights`, which takes them in on the rollout slots of a split placement."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from rl_core.metrics import compute_data_metrics, count_tokens
from rl_core.schema import (
    ADVANTAGES,
    ATTENTION_MASK,
    INPUT_IDS,
    OLD_LOG_PROBS,
    REF_LOG_PROBS,
    RESPONSE_MASK,
    RETURNS,
    VALUES,
)
from rl_engines.training import StepResult
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import policy_inputs, require_fields, single_input, with_fields
from rl_runtime.nodes._continuous import rollout_steps_ahead
from rl_runtime.nodes._log_probs import forward_field, policy_forward_metrics, skips_old_log_prob_pass
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._staleness import staleness_metrics
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_ACTOR_NEEDS = (RESPONSE_MASK, ADVANTAGES)
_OLD_LOG_PROBS = OLD_LOG_PROBS
"""Needed by the actor too, unless `compute_old_log_prob` left them to the update (`skips_old_log_prob_pass`)."""
_CRITIC_NEEDS = (INPUT_IDS, ATTENTION_MASK, RESPONSE_MASK, VALUES, RETURNS)
TRAIN_ACTOR_OPERATION = "train_actor"
RECEIVE_WEIGHTS_OPERATION = "receive_weights"
CHECKSUM_METRIC_HEX_DIGITS = 13
"""A weights checksum (SHA-256 hex) enters the metrics as the integer of its first 13 hex digits: 52 bits, which a
float64 holds exactly, so two sides' values compare equal exactly when those digits agree."""


def update_metrics(results: Sequence[StepResult], prefix: str, loss_name: str) -> dict[str, float]:
    """verl's update metrics averaged over the optimizer steps: loss, grad norm, lr, the loss's own metrics."""
    applied = [result for result in results if not result.skipped]
    metrics = {
        f"{prefix}/{loss_name}": _mean([result.loss for result in results]),
        f"{prefix}/grad_norm": _mean([result.grad_norm for result in applied]),
        f"{prefix}/lr": results[-1].lr,
        f"{prefix}/num_skipped_steps": float(len(results) - len(applied)),
    }
    for name in sorted({name for result in results for name in result.metrics}):
        metrics[name] = _mean([result.metrics[name] for result in results if name in result.metrics])
    return metrics


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


SERVERS_SKIPPED_METRIC = "sync/servers_skipped"
"""Rollout servers of a fleet that a weight update skipped because they did not answer (0 when none: absent)."""


def checksum_metric(checksum: str) -> float:
    """A weights checksum (hex digest) as a metric value: its first `CHECKSUM_METRIC_HEX_DIGITS` hex digits."""
    return float(int(checksum[:CHECKSUM_METRIC_HEX_DIGITS], 16))


def sync_rollout_weights(res: NodeResources, version: int) -> dict[str, float]:
    """Have the actor publish its weights to the rollout engine as `version` (`ActorRole.publish_weights`: its
    engine exports them into the sync it is connected to): into this worker's own engine (the
    `rl_engines.sync.WeightSync` wakes it first when colocated asleep), or, under split placement, to the rollout slots.

    Metrics: `sync/weight_version`, and from the worker that sent them `sync/bytes`, `sync/num_tensors` and
    `sync/weights_checksum` (`checksum_metric` of the tensors as sent); `sync/servers_skipped` when the update left
    out rollout servers that do not answer."""
    if res.actor is None:
        raise StepDataError("this worker holds no actor to publish weights from; the actor runs on the training slots")
    report = res.actor.publish_weights(version)
    res.policy_version = version
    metrics = {"sync/weight_version": float(version)}
    if report.tensors:  # a training rank that only took part in the export's gathers sent nothing
        metrics.update({"sync/bytes": float(report.nbytes), "sync/num_tensors": float(report.tensors)})
    if report.checksum is not None:
        metrics["sync/weights_checksum"] = checksum_metric(report.checksum)
    if report.skipped:  # a server fleet's servers that did not answer (see rl_engines.remote.FleetWeightSync)
        metrics[SERVERS_SKIPPED_METRIC] = float(len(report.skipped))
    return metrics


def receive_rollout_weights(res: NodeResources, version: int) -> dict[str, float]:
    """Split placement, rollout slot: wait for weight `version` from the training slots and load it into the rollout
    engine (verified against the sender's checksum). Metrics: `rollout/weight_version`, `rollout/weights_checksum`.

    A different version than `version` means the two sides disagree on how many updates happened: a StepDataError,
    since sampling from it would silently go off-policy."""
    if res.weight_receiver is None:
        raise StepDataError(
            "this worker has no weight receiver; receive_weights runs on the rollout slots of a split placement "
            "(placement.colocate=false)"
        )
    report = res.weight_receiver.receive()
    if report.version != version:
        raise StepDataError(
            f"the rollout slot expected weight version {version} but the training slots sent {report.version}; "
            "the two sides ran a different number of actor updates"
        )
    res.policy_version = version
    metrics = {"rollout/weight_version": float(version)}
    if report.checksum is not None:
        metrics["rollout/weights_checksum"] = checksum_metric(report.checksum)
    return metrics


def catch_up_weights(res: NodeResources, version: int) -> dict[str, float]:
    """Split placement, rollout slot: receive weight versions one by one until the engine holds `version` (none when
    it already does). Metrics: those of the last version received, or `rollout/weight_version` alone."""
    metrics = {"rollout/weight_version": float(res.policy_version)}
    while res.policy_version < version:
        metrics = receive_rollout_weights(res, res.policy_version + 1)
    return metrics


def next_rollout_version(res: NodeResources, step: int) -> int:
    """The weight version rollout step `step + 1` samples from: the next one (synchronous, `max_staleness` 0), or
    with `max_staleness` eta > 0 the newest that keeps the rollout at most eta versions behind the training step that
    will consume it, `max(held, step + 1 - eta)`: the rollout slots run up to eta steps ahead of training (eta - 1
    under continuous generation, `rollout_steps_ahead`)."""
    if res.config.algorithm.max_staleness == 0:
        return res.policy_version + 1
    return max(res.policy_version, step + 1 - rollout_steps_ahead(res.config))


@register_operation(RECEIVE_WEIGHTS_OPERATION)
def receive_weights(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Split placement: the rollout slot waits for the actor update the next step samples from and loads it
    (`next_rollout_version`: this step's update when synchronous; eta steps back with `algorithm.max_staleness`
    eta, so the rollout runs ahead) (the inputs only order it after the rollout's other nodes). The worker reports
    the wait and the load as the node's `timing_s/<node id>`."""
    res = ctx.resources
    return StepData(metrics=catch_up_weights(res, next_rollout_version(res, ctx.step)))


@register_operation(TRAIN_ACTOR_OPERATION)
def train_actor(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """PPO-style actor update over mini-batches and epochs, then the weight sync to the rollout engine.

    On an on-policy step without `old_log_probs` (`skips_old_log_prob_pass`) the update takes them from its own
    training forward, adds them to the batch and reports `compute_old_log_prob`'s metrics from that forward; where
    the actor skips the inert rows' forward (`algorithm.skip_inert_rows`), the metrics cover the trained rows and the
    batch gets no `old_log_probs`. `actor/inert_row_fraction`: the share of rows the actor's loss ignores.
    """
    res = ctx.resources
    data = single_input(ctx, inputs)
    from_update = _OLD_LOG_PROBS not in data.batch and skips_old_log_prob_pass(res.config)
    needs = (*policy_inputs(data), *_ACTOR_NEEDS, *(() if from_update else (_OLD_LOG_PROBS,)))
    require_fields(data, needs, ctx.node.id)
    if res.config.algorithm.kl.coef > 0 and res.reference is not None and REF_LOG_PROBS not in data.batch:
        raise StepDataError(f"node {ctx.node.id!r}: the KL loss needs ref_log_probs; run compute_ref_log_prob first")
    actor = res.require_actor(ctx.node.id)
    metrics: dict[str, float] = {}
    added: dict[str, torch.Tensor] = {}
    eta = res.config.algorithm.max_staleness
    if eta > 0:
        metrics.update(staleness_metrics(data.batch, res.policy_version, eta))
    inert = actor.inert_rows(data.batch)
    if inert is not None:
        metrics["actor/inert_row_fraction"] = inert.float().mean().item()
    with timed("update_actor", metrics):
        if from_update:
            result, forward = actor.update_on_policy(data.batch)  # on-policy: a single mini-batch
            results = [result]
            if actor.skips_inert_forward and inert is not None:  # those rows ran no forward
                metrics.update(policy_forward_metrics(forward, data.batch, ~inert))
            else:
                added[_OLD_LOG_PROBS] = forward_field(forward.log_probs, "log_probs")
                metrics.update(policy_forward_metrics(forward, data.batch))
        else:
            results = actor.update(data.batch, res.config.batch.mini_batches_per_step)
    metrics.update(update_metrics(results, "actor", "pg_loss"))
    with timed("update_weights", metrics):
        metrics.update(sync_rollout_weights(res, res.policy_version + 1))
    metrics.update(
        compute_data_metrics(
            data.batch,
            max_prompt_length=res.config.data.max_prompt_length,
            max_response_length=res.config.data.max_response_length,
            use_critic=res.critic is not None,
        )
    )
    metrics["perf/total_num_tokens"] = float(count_tokens(data.batch))
    return with_fields(data, metrics, **added)


@register_operation("train_critic")
def train_critic(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Clipped value-loss updates of the critic over mini-batches and epochs."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    if res.critic is None:
        raise StepDataError(f"node {ctx.node.id!r} trains a critic but the run has none; add a critic section")
    require_fields(data, _CRITIC_NEEDS, ctx.node.id)
    metrics: dict[str, float] = {}
    with timed("update_critic", metrics):
        results = res.critic.update(data.batch, res.config.batch.mini_batches_per_step)
    metrics.update(update_metrics(results, "critic", "vf_loss"))
    return with_fields(data, metrics)
