"""ReMax (Li et al. 2023, https://arxiv.org/abs/2310.10505): the greedy rollout's reward as the baseline."""

from __future__ import annotations

import torch

from rl_core.advantages._groups import broadcast_to_tokens
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._returns import discounted_returns
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput
from rl_core.schema import BASELINE_REWARDS

_UNDISCOUNTED = 1.0


@register_advantage_estimator("remax")
@torch.no_grad()
def remax(inputs: AdvantageInputs) -> AdvantageOutput:
    """Undiscounted per-token reward-to-go minus the sequence's greedy-rollout reward.

    Needs `inputs.baseline_rewards` `(B,)`.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `baseline_rewards` are read.

    Returns:
        `(B, T)` advantages and returns (the reward-to-go), zero where `response_mask` is 0.
    """
    baseline = inputs.require(BASELINE_REWARDS, "remax")
    returns = discounted_returns(inputs.token_level_rewards, inputs.mask, _UNDISCOUNTED)
    advantages = returns - broadcast_to_tokens(baseline.to(returns.dtype), inputs.mask)
    return AdvantageOutput(advantages, returns)
