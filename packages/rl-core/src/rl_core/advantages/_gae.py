"""Generalized Advantage Estimation (Schulman et al. 2016, https://arxiv.org/abs/1506.02438)."""

from __future__ import annotations

import torch

from rl_core.advantages._params import check_unit_interval
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput
from rl_core.schema import VALUES

_DEFAULT_GAMMA = 1.0
_DEFAULT_LAMBDA = 1.0


@register_advantage_estimator("gae")
@torch.no_grad()
def gae(inputs: AdvantageInputs, *, gamma: float = _DEFAULT_GAMMA, lam: float = _DEFAULT_LAMBDA) -> AdvantageOutput:
    """GAE advantages and value targets from per-token rewards and critic values.

    Needs `inputs.values` `(B, T)`. Tokens under a zero mask are skipped, not treated as steps: the TD error
    of a response token bootstraps from the value of the next *response* token, so observation spans in a
    multi-turn response neither break the chain nor add discounting. Advantages are not whitened here;
    apply `whiten(advantages, response_mask)` where PPO wants it.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `values` are read.
        gamma: discount per response token, in [0, 1].
        lam: GAE lambda, in [0, 1]; 1 gives Monte-Carlo returns minus values, 0 the one-step TD error.

    Returns:
        `(B, T)` advantages and returns (= advantages + values), zero where `response_mask` is 0.
    """
    values = inputs.require(VALUES, "gae")
    check_unit_interval("gamma", gamma)
    check_unit_interval("lam", lam)
    mask = inputs.mask
    rewards = inputs.token_level_rewards
    dtype = torch.promote_types(rewards.dtype, values.dtype)
    rewards, values = rewards.to(dtype), values.to(dtype)
    zero = torch.zeros((), dtype=dtype, device=rewards.device)
    advantages = torch.zeros_like(rewards)
    next_value = torch.zeros_like(rewards[:, 0])
    running = torch.zeros_like(rewards[:, 0])
    # Backwards recursion in time, vectorised over the batch; masked steps carry both accumulators through.
    for t in reversed(range(rewards.shape[-1])):
        step = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = torch.where(step, delta + gamma * lam * running, running)
        next_value = torch.where(step, values[:, t], next_value)
        advantages[:, t] = torch.where(step, running, zero)
    returns = torch.where(mask, advantages + values, zero)
    return AdvantageOutput(advantages, returns)
