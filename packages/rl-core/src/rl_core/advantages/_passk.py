"""Pass@k training advantage (Chen et al. 2025, https://arxiv.org/abs/2503.19595): only each group's best counts."""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput

_DEFAULT_EPSILON = 1e-6
"""Added to the group std so a group whose rewards are all equal gets advantage 0, not NaN."""


@register_advantage_estimator("grpo_passk")
@torch.no_grad()
def grpo_passk(
    inputs: AdvantageInputs, *, norm_by_std: bool = True, epsilon: float = _DEFAULT_EPSILON
) -> AdvantageOutput:
    """The best sample of each group gets `(r_max - r_second_max) / (std_g + epsilon)`; every other sample 0.

    `r` is the sequence's masked reward sum. When the maximum is tied nobody improves on the rest of the
    group, so the whole group gets 0 (which tied sample would be "best" is then irrelevant). Every group
    needs at least two samples.

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
    if bool((stats.count < 2).any()):
        smallest = int(stats.count.min())
        raise ValueError(
            f"grpo_passk needs at least 2 samples per group, but group_ids has a group of {smallest}; "
            "sample several responses per prompt"
        )
    num_groups = stats.count.numel()
    lowest = torch.full((num_groups,), -torch.inf, dtype=scores.dtype, device=scores.device)
    best = lowest.scatter_reduce(0, stats.index, scores, reduce="amax")
    is_best = scores == best[stats.index]
    best_count = torch.zeros_like(best).index_add_(0, stats.index, is_best.to(scores.dtype))
    runner_up = lowest.scatter_reduce(0, stats.index, scores.masked_fill(is_best, -torch.inf), reduce="amax")
    # A tied maximum is its own runner-up: the margin is 0 for the whole group.
    margin = torch.where(best_count > 1, torch.zeros_like(best), best - runner_up)
    if norm_by_std:
        margin = margin / (stats.std + epsilon)
    per_sequence = torch.where(is_best, margin[stats.index], torch.zeros_like(scores))
    advantages = broadcast_to_tokens(per_sequence, inputs.mask)
    return AdvantageOutput(advantages, advantages)
