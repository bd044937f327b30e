"""The `compute_advantage` operation: rewards (with the KL penalty when it goes in the reward), then advantages."""

from __future__ import annotations

from collections.abc import Mapping

from rl_core.kl import REWARD_KL_METRIC, apply_kl_penalty
from rl_core.schema import (
    GROUP_ID,
    OLD_LOG_PROBS,
    REF_LOG_PROBS,
    RESPONSE_MASK,
    ROLLOUT_LOG_PROBS,
    TOKEN_LEVEL_REWARDS,
    TOKEN_LEVEL_SCORES,
)
from rl_runtime.config import KLMode
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import require_fields, single_input, with_fields
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = (TOKEN_LEVEL_SCORES, RESPONSE_MASK, GROUP_ID)


@register_operation("compute_advantage")
def compute_advantage(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `token_level_rewards`, `advantages` and `returns` `(B, T)` with the configured estimator.

    Group estimators (grpo, rloo) see only this rank's samples; the rollout keeps each prompt's group on one
    rank, so their advantages equal the global ones. Batch-whitened estimators (reinforce_plus_plus) whiten
    over this rank's samples.
    """
    res = ctx.resources
    data = single_input(ctx, inputs)
    require_fields(data, _NEEDS, ctx.node.id)
    algorithm = res.config.algorithm
    batch = data.batch
    metrics: dict[str, float] = {}
    with timed("adv", metrics):
        rewards = batch[TOKEN_LEVEL_SCORES]
        if algorithm.kl.mode is KLMode.IN_REWARD:
            if REF_LOG_PROBS not in batch:
                raise StepDataError(
                    f"algorithm.kl.mode=in_reward needs ref_log_probs before node {ctx.node.id!r}, but the pipeline "
                    "computes them later; use kl.mode=as_loss, or a pipeline with reference_log_prob before "
                    "calculate_advantages"
                )
            controller = res.kl_controller
            if controller is None:
                raise StepDataError(
                    f"algorithm.kl.mode=in_reward needs a KL controller, but node {ctx.node.id!r} runs on a worker "
                    "whose NodeResources.kl_controller is None; build the workers with rl_runtime.trainer's "
                    "resources factory, or give NodeResources a rl_core.kl controller"
                )
            # verl's apply_kl_penalty compares the old log-probs (the actor's forward of the weights that sampled,
            # the proximal policy's under max_staleness > 0) with the reference: the built-ins' in-reward variants
            # compute both before this node. A pipeline file with only the reference first gets the rollout's.
            current = batch.get(OLD_LOG_PROBS, batch[ROLLOUT_LOG_PROBS])
            penalty = apply_kl_penalty(
                rewards,
                current,
                batch[REF_LOG_PROBS],
                batch[RESPONSE_MASK],
                kl_coef=controller.value,
                estimator=algorithm.kl.estimator,
            )
            rewards = penalty.token_level_rewards
            metrics.update(penalty.metrics)
            controller.update(penalty.metrics[REWARD_KL_METRIC], n_steps=int(rewards.shape[0]))
        # The estimator reads the batch by the schema's names (values and baseline rewards where present).
        output = res.require_advantage_estimator()({**batch, TOKEN_LEVEL_REWARDS: rewards})
    return with_fields(data, metrics, token_level_rewards=rewards, advantages=output.advantages, returns=output.returns)
