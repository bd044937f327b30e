"""Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
https://arxiv.org/abs/2505.22617): drop the gradient of a few tokens whose advantage/log-prob covariance is high.
"""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import clip_range, masked_batch, masked_mean, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO = 0.2
DEFAULT_CLIP_COV_RATIO = 2e-4
"""Fraction of the batch's response tokens whose gradient is dropped (verl's and the paper's default)."""

DEFAULT_CLIP_COV_LB = 1.0
DEFAULT_CLIP_COV_UB = 5.0
"""Only tokens with covariance strictly inside (lb, ub) are candidates (verl's defaults)."""


@register_policy_loss("clip_cov")
def clip_cov(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_cov_ratio: float = DEFAULT_CLIP_COV_RATIO,
    clip_cov_lb: float = DEFAULT_CLIP_COV_LB,
    clip_cov_ub: float = DEFAULT_CLIP_COV_UB,
    generator: torch.Generator | None = None,
) -> PolicyLossOutput:
    """PPO's clipped loss (no dual clip) with a random few high-covariance tokens zeroed, as verl's `clip_cov`.

    Per token, `cov = (A - mean(A)) * (log_probs - mean(log_probs))` (means over the batch's response
    tokens). Candidates are response tokens not already clipped by PPO with `lb < cov < ub`;
    `max(1, int(clip_cov_ratio * num_response_tokens))` of them, drawn uniformly at random, get a zero
    loss (and so no gradient). The per-token loss is otherwise
    `max(-A * r, -A * clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high))` with `r = exp(log_probs -
    old_log_probs)` (unclamped, as verl). The draw is `torch.randperm` over the candidates in row-major
    order, on the CPU's default generator unless `generator` is given: seeding it the same as verl gives
    verl's choice. Counts are of this batch, not the global step.

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: >= 0, symmetric clip range.
        clip_ratio_low: >= 0, lower clip range; defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range; defaults to `clip_ratio`.
        clip_cov_ratio: > 0, fraction of response tokens to zero.
        clip_cov_lb: lower covariance bound (exclusive).
        clip_cov_ub: upper covariance bound (exclusive), > `clip_cov_lb`.
        generator: random generator of the draw (any device).

    Returns:
        The loss and `pg_clipfrac` (fraction of response tokens zeroed, verl's meaning for this loss), `ppo_kl`.
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    check_positive("clip_cov_ratio", clip_cov_ratio)
    if not clip_cov_lb < clip_cov_ub:
        raise ValueError(f"clip_cov_lb must be < clip_cov_ub, got {clip_cov_lb} and {clip_cov_ub}")
    batch = masked_batch(inputs)
    mask, advantages, log_probs = batch.mask, batch.advantages, batch.log_probs
    log_ratio = log_probs - batch.old_log_probs
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - low, 1 + high)
    with torch.no_grad():
        detached = log_probs.detach()
        cov = (advantages - masked_mean(advantages, mask)) * (detached - masked_mean(detached, mask))
        candidates = mask & ~(clipped > unclipped) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
        candidate_index = candidates.flatten().nonzero().squeeze(-1)
        dropped = torch.zeros(mask.numel(), dtype=torch.bool, device=mask.device)
        if candidate_index.numel() > 0:
            num_drop = max(int(clip_cov_ratio * int(mask.sum())), 1)
            device = generator.device if generator is not None else torch.device("cpu")
            order = torch.randperm(candidate_index.numel(), generator=generator, device=device)
            dropped[candidate_index[order[:num_drop].to(mask.device)]] = True
        dropped = dropped.view_as(mask)
    per_token = torch.where(dropped, torch.zeros_like(unclipped), torch.maximum(unclipped, clipped))
    metrics = {"pg_clipfrac": metric(dropped, mask), "ppo_kl": metric(-log_ratio, mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
