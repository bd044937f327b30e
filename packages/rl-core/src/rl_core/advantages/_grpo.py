"""Group-relative advantages: GRPO (Shao et al. 2024) and Dr. GRPO (Liu et al. 2025) without the std."""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput

_DEFAULT_EPSILON = 1e-6
"""Added to the group std so a group whose rewards are all equal gets advantage 0, not NaN."""


@register_advantage_estimator("grpo")
@torch.no_grad()
def grpo(inputs: AdvantageInputs, *, norm_by_std: bool = True, epsilon: float = _DEFAULT_EPSILON) -> AdvantageOutput:
    """Outcome advantage `(r_i - mean_g) / (std_g + epsilon)` within each prompt group, on every response token.

    `r_i` is the sequence's masked reward sum. A singleton group has mean 0 and std 1 (it keeps its reward).
    `norm_by_std=False` drops the division (Dr. GRPO, https://arxiv.org/abs/2503.20783).

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.
        norm_by_std: divide by the unbiased group std.
        epsilon: > 0, added to the std.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    check_positive("epsilon", epsilon)
    scores = outcome_scores(inputs.token_level_rewards, inputs.mask)
    stats = group_stats(scores, inputs.group_ids)
    centred = scores - stats.mean[stats.index]
    per_sequence = centred / (stats.std[stats.index] + epsilon) if norm_by_std else centred
    advantages = broadcast_to_tokens(per_sequence, inputs.mask)
    return AdvantageOutput(advantages, advantages)
