"""On-Policy RL with Optimal reward baseline (Hao et al. 2025, https://arxiv.org/abs/2505.23585)."""

from __future__ import annotations

import torch

from rl_core._groups import group_sum
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput


@register_advantage_estimator("opo")
@torch.no_grad()
def opo(inputs: AdvantageInputs) -> AdvantageOutput:
    """Outcome reward minus the response-length-weighted mean reward of its group, on every response token.

    The baseline is `sum_j(len_j * r_j) / sum_j(len_j)` over the group, `len_j` the sample's response
    token count. A singleton group, or one whose responses are all empty, has baseline 0.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    mask = inputs.mask
    scores = outcome_scores(inputs.token_level_rewards, mask)
    lengths = mask.sum(dim=-1).to(scores.dtype)
    stats = group_stats(scores, inputs.group_ids)
    num_groups = stats.count.numel()
    weighted = group_sum(lengths * scores, stats.index, num_groups)
    total_length = group_sum(lengths, stats.index, num_groups)
    has_baseline = (stats.count > 1) & (total_length > 0)
    baseline = torch.where(has_baseline, weighted / total_length.clamp(min=1), torch.zeros_like(weighted))
    advantages = broadcast_to_tokens(scores - baseline[stats.index], mask)
    return AdvantageOutput(advantages, advantages)
