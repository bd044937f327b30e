"""The advantage of CPGD (Liu et al. 2025, "CPGD: Toward Stable Rule-based Reinforcement Learning for Language
Models", https://arxiv.org/abs/2505.12504), as its official code (ModalMinds/MM-EUREKA, OpenRLHF-based
`experience_maker.py`: the `group_norm` estimator times `clip_filter_like_weight_func`) computes it.

CPGD's novelty is in its loss (clipped log-ratio policy gradient plus a policy-drift penalty); its advantage
is a group-relative one, `A_i = w_i * (r_i - mean_g)`, with two weighting options:

- STD weight (`norm_by_std=True`, the paper's default): `w_i = 1 / (std_g + epsilon)`, i.e. GRPO's
  normalisation; equal weight (`norm_by_std=False`): `w_i = 1`.
- clip-filter-like weight (`clip_filter_weight=True`): groups whose rewards are all equal carry no signal
  (an online filter would drop them); instead of dropping them, the remaining groups are scaled up by
  `min(G / G_informative, max_weight)`, `G` the number of groups in the batch, so the batch gradient keeps
  the size it would have had after filtering, capped for stability.
"""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.advantages._groups import broadcast_to_tokens, group_stats, outcome_scores
from rl_core.advantages._registry import register_advantage_estimator
from rl_core.advantages._types import AdvantageInputs, AdvantageOutput

_DEFAULT_EPSILON = 1e-9
"""Added to the group std; the official CPGD code uses 1e-9."""

_DEFAULT_MAX_WEIGHT = 3.0
"""Cap of the clip-filter-like weight (`--clip_filter_like_weight_clip_eps` in the official code)."""

_MIN_WEIGHT = 1.0
"""The clip-filter-like weight only ever scales informative groups up."""


@register_advantage_estimator("cpgd")
@torch.no_grad()
def cpgd(
    inputs: AdvantageInputs,
    *,
    norm_by_std: bool = True,
    clip_filter_weight: bool = False,
    max_weight: float = _DEFAULT_MAX_WEIGHT,
    epsilon: float = _DEFAULT_EPSILON,
) -> AdvantageOutput:
    """CPGD's group-relative outcome advantage on every response token (see the module docstring).

    `r_i` is the sequence's masked reward sum. A group of two or more samples with all rewards equal gets
    exactly 0. A singleton group has mean 0 and std 1, and counts as informative. With
    `clip_filter_weight` the weight depends on the whole batch: call this on the full rollout batch.

    Args:
        inputs: the batch; `token_level_rewards`, `response_mask` and `group_ids` are read.
        norm_by_std: STD weight (divide by the unbiased group std) rather than equal weight.
        clip_filter_weight: scale informative groups by `min(G / G_informative, max_weight)`.
        max_weight: >= 1, cap of the clip-filter-like weight.
        epsilon: > 0, added to the std.

    Returns:
        `(B, T)` advantages and returns (equal), zero where `response_mask` is 0.
    """
    check_positive("epsilon", epsilon)
    if not max_weight >= _MIN_WEIGHT:
        raise ValueError(f"max_weight must be >= {_MIN_WEIGHT} (the weight only scales groups up), got {max_weight}")
    scores = outcome_scores(inputs.token_level_rewards, inputs.mask)
    stats = group_stats(scores, inputs.group_ids)
    num_groups = stats.count.numel()
    highest = torch.full((num_groups,), -torch.inf, dtype=scores.dtype, device=scores.device)
    lowest = torch.full((num_groups,), torch.inf, dtype=scores.dtype, device=scores.device)
    highest = highest.scatter_reduce(0, stats.index, scores, reduce="amax")
    lowest = lowest.scatter_reduce(0, stats.index, scores, reduce="amin")
    uninformative = (stats.count > 1) & (highest == lowest)
    centred = scores - stats.mean[stats.index]
    per_sequence = centred / (stats.std[stats.index] + epsilon) if norm_by_std else centred
    # Exactly 0, not rounding noise divided by epsilon, for groups without signal.
    per_sequence = torch.where(uninformative[stats.index], torch.zeros_like(per_sequence), per_sequence)
    if clip_filter_weight:
        # Kept as tensors (no host sync). With no informative group every advantage is already 0.
        informative = (~uninformative).sum().clamp(min=1).to(scores.dtype)
        per_sequence = per_sequence * (num_groups / informative).clamp(max=max_weight)
    advantages = broadcast_to_tokens(per_sequence, inputs.mask)
    return AdvantageOutput(advantages, advantages)
