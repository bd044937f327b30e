"""Geometric-Mean Policy Optimization (Zhao et al. 2025, https://arxiv.org/abs/2507.20673)."""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer, aggregate_loss
from rl_core.losses._common import clip_range, masked_batch, metric
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO = 0.4
"""GMPO clips token log-ratios to (-0.4, 0.4), i.e. ratios to (e^-0.4, e^0.4) (the paper's default)."""

_LOG_EPSILON = 1e-10
"""Added before the log of the rollout IS weights, so a zero weight gives a tiny, not an undefined, mean."""


@register_policy_loss("geo_mean")
def geo_mean(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
) -> PolicyLossOutput:
    """GMPO's sequence loss `-mean_t(A) * exp(mean_t(clipped log r))`, as verl's `geo_mean` loss.

    Per token, the log-ratio `log r = log_probs - old_log_probs` is clipped to
    `(-clip_ratio_low, clip_ratio_high)` on the side that would increase the objective, as PPO clips the
    ratio: `sign(A) * min(sign(A) * log r, sign(A) * clamp(log r, -clip_ratio_low, clip_ratio_high))`.
    The sequence ratio is the geometric mean of the clipped token ratios; the advantage is the mean over
    the sequence's tokens (GMPO assumes sequence-level advantages). Rollout IS weights enter as their
    per-sequence geometric mean, as in verl.

    Every response token carries its sequence's loss, so "seq-mean-token-mean" gives GMPO's objective
    (the mean over sequences, which verl takes over every row, empty ones included) and "token-mean" a
    length-weighted mean. The gradient at `log_probs == old_log_probs` is the same as the other losses'.

    Args:
        inputs: the batch.
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: >= 0, symmetric clip range of the token log-ratio.
        clip_ratio_low: >= 0, lower clip range; defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range; defaults to `clip_ratio`.

    Returns:
        The loss and `pg_clipfrac` (positive-advantage tokens clipped), `pg_clipfrac_lower`
        (negative-advantage tokens clipped), `ppo_kl`.
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    batch = masked_batch(inputs)
    mask, advantages = batch.mask, batch.advantages
    log_ratio = batch.log_probs - batch.old_log_probs
    sign = torch.sign(advantages)
    bounded = log_ratio.clamp(-low, high)
    pessimistic = sign * torch.minimum(sign * log_ratio, sign * bounded)
    lengths = mask.sum(dim=-1).clamp(min=1)
    sequence_ratio = torch.exp(pessimistic.sum(dim=-1) / lengths)
    sequence_advantage = advantages.sum(dim=-1) / lengths
    sequence_loss = -sequence_advantage * sequence_ratio
    if batch.weights is not None:
        log_weights = torch.where(mask, torch.log(batch.weights + _LOG_EPSILON), batch.weights.new_zeros(()))
        sequence_loss = sequence_loss * torch.exp(log_weights.sum(dim=-1) / lengths)
    per_token = sequence_loss.unsqueeze(-1).expand_as(log_ratio)
    was_clipped = log_ratio != bounded
    metrics = {
        "pg_clipfrac": metric(was_clipped & (advantages > 0), mask),
        "pg_clipfrac_lower": metric(was_clipped & (advantages < 0), mask),
        "ppo_kl": metric(-log_ratio, mask),
    }
    return PolicyLossOutput(aggregate_loss(per_token, mask, aggregation, normalizer), metrics)
