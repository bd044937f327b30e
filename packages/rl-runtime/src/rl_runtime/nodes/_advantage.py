"""The `compute_advantage` operation: rewards (with the KL penalty when it goes in the reward), then advantages."""

from __future__ import annotations

from collections.abc import Mapping

from rl_core.schema import GROUP_ID, RESPONSE_MASK, TOKEN_LEVEL_REWARDS, TOKEN_LEVEL_SCORES
from rl_runtime.config import KLMode
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import require_fields, single_input, with_fields
from rl_runtime.nodes._kl_reward import penalise_rewards
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.workers import NodeContext, StepData, register_operation

_NEEDS = (TOKEN_LEVEL_SCORES, RESPONSE_MASK, GROUP_ID)


@register_operation("compute_advantage")
def compute_advantage(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `token_level_rewards`, `advantages` and `returns` `(B, T)` with the configured estimator.

    Group estimators (grpo, rloo) see only this rank's samples; the rollout keeps each prompt's group on one
    rank, so their advantages equal the global ones. Batch-whitened estimators (reinforce_plus_plus) whiten
    over this rank's samples. Under `algorithm.kl.mode=in_reward` the estimator reads the scores minus the KL
    penalty (`penalise_rewards`: verl's `actor/reward_kl_penalty` metrics, the controller stepped on the step's KL).
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
            rewards, kl_metrics = penalise_rewards(ctx, batch, rewards)
            metrics.update(kl_metrics)
        # The estimator reads the batch by the schema's names (values and baseline rewards where present).
        output = res.require_advantage_estimator()({**batch, TOKEN_LEVEL_REWARDS: rewards})
    return with_fields(data, metrics, token_level_rewards=rewards, advantages=output.advantages, returns=output.returns)
