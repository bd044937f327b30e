"""Group Policy Gradient (Chu et al. 2025, https://arxiv.org/abs/2504.02546)."""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput

_DEFAULT_F_NORM = 1.0


@register_advantage_estimator("gpg")
@torch.no_grad()
def gpg(inputs: AdvantageInputs, *, f_norm: float = _DEFAULT_F_NORM) -> AdvantageOutput:
    """Outcome advantage `alpha * (r_i - mean_g) / f_norm` on every response token.

    `alpha = B / max(1, number of samples with a non-zero outcome reward)` rescales the batch gradient
    so that samples without signal do not dilute it (GPG's gradient-estimation correction, as verl
    computes it). `alpha` depends on the whole batch: call this on the full rollout batch. A singleton
    group has mean 0.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.
        f_norm: > 0, constant normaliser of the advantage.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    check_positive("f_norm", f_norm)
    scores = outcome_scores(inputs.token_level_rewards, inputs.mask)
    stats = group_stats(scores, inputs.group_ids)
    alpha = scores.numel() / torch.count_nonzero(scores).clamp(min=1).to(scores.dtype)
    per_sequence = alpha * (scores - stats.mean[stats.index]) / f_norm
    advantages = broadcast_to_tokens(per_sequence, inputs.mask)
    return AdvantageOutput(advantages, advantages)
