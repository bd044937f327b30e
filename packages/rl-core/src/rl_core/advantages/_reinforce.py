"""REINFORCE++ and REINFORCE++-baseline (Hu et al. 2025, https://arxiv.org/abs/2501.03262)."""

from __future__ import annotations

import torch

from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._params import check_unit_interval
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._returns import discounted_returns
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput
from rl_core.advantages._whiten import whiten

_DEFAULT_GAMMA = 1.0


@register_advantage_estimator("reinforce_plus_plus")
@torch.no_grad()
def reinforce_plus_plus(inputs: AdvantageInputs, *, gamma: float = _DEFAULT_GAMMA) -> AdvantageOutput:
    """Discounted per-token reward-to-go, whitened over all response tokens of the batch.

    The batch must hold at least two response tokens. Whitening uses the whole batch, so call it on the
    full rollout batch, not on micro-batches.

    Args:
        inputs: the batch; `token_level_rewards` and `response_mask` are read.
        gamma: discount per response token, in [0, 1]; masked tokens are skipped.

    Returns:
        `(B, T)` whitened advantages and the un-whitened returns, zero where `response_mask` is 0.
    """
    check_unit_interval("gamma", gamma)
    returns = discounted_returns(inputs.token_level_rewards, inputs.mask, gamma)
    return AdvantageOutput(whiten(returns, inputs.mask), returns)


@register_advantage_estimator("reinforce_plus_plus_baseline")
@torch.no_grad()
def reinforce_plus_plus_baseline(inputs: AdvantageInputs) -> AdvantageOutput:
    """Outcome reward minus its group mean on every response token, then whitened over the batch's tokens.

    A singleton group has baseline 0. Whitening weights each sequence by its token count and uses the
    whole batch (at least two response tokens), so call it on the full rollout batch.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    scores = outcome_scores(inputs.token_level_rewards, inputs.mask)
    stats = group_stats(scores, inputs.group_ids)
    centred = broadcast_to_tokens(scores - stats.mean[stats.index], inputs.mask)
    advantages = whiten(centred, inputs.mask)
    return AdvantageOutput(advantages, advantages)
