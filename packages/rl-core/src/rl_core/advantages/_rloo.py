"""REINFORCE Leave-One-Out (Kool et al. 2019; Ahmadian et al. 2024, https://arxiv.org/abs/2402.14740)."""

from __future__ import annotations

import torch

from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput


@register_advantage_estimator("rloo")
@torch.no_grad()
def rloo(inputs: AdvantageInputs) -> AdvantageOutput:
    """Outcome advantage `r_i - mean(r_j for the other samples j of the group)`, on every response token.

    `r_i` is the sequence's masked reward sum. A singleton group has no other sample, so its baseline is 0
    and it keeps its reward (as verl's `rloo`; verl's `rloo_vectorized` zeroes it instead).

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    scores = outcome_scores(inputs.token_level_rewards, inputs.mask)
    stats = group_stats(scores, inputs.group_ids)
    others = stats.count[stats.index] - 1
    # For a singleton, total - score is exactly 0 and the clamp keeps the division finite: baseline 0.
    baseline = (stats.total[stats.index] - scores) / others.clamp(min=1)
    advantages = broadcast_to_tokens(scores - baseline, inputs.mask)
    return AdvantageOutput(advantages, advantages)
