"""PPO's clipped surrogate (Schulman et al. 2017) with clip-higher (DAPO) and dual-clip (Ye et al. 2019)."""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import MaskedBatch, clamped_log_ratio, clip_range, masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO = 0.2
"""PPO's epsilon."""

DEFAULT_CLIP_RATIO_C = 3.0
"""Dual-clip bound on the loss of negative-advantage tokens (https://arxiv.org/abs/1912.09729; verl's default)."""


@register_policy_loss("ppo", advantage_multiple=True)
def ppo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float | None = DEFAULT_CLIP_RATIO_C,
) -> PolicyLossOutput:
    """PPO's clipped policy loss, as verl's `vanilla` loss.

    With `r = exp(clamp(log_probs - old_log_probs, -20, 20))` and advantage `A`, the per-token loss is
    `max(-A * r, -A * clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high))`; for `A < 0` it is further
    capped at `-A * clip_ratio_c` (dual clip: a huge ratio on a bad token cannot blow the loss up).

    Args:
        inputs: the batch (`log_probs`, `old_log_probs`, `advantages`, `response_mask`, optional
            `rollout_is_weights` multiplying the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: >= 0, symmetric clip range.
        clip_ratio_low: >= 0, lower clip range; defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range (DAPO's clip-higher, e.g. 0.28); defaults to `clip_ratio`.
        clip_ratio_c: > 1, dual-clip bound; `None` turns dual clip off.

    Returns:
        The loss and `pg_clipfrac`, `pg_clipfrac_lower`, `ppo_kl`.
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    check_dual_clip(clip_ratio_c)
    batch = masked_batch(inputs)
    per_token, metrics = clipped_surrogate(batch, low, high, clip_ratio_c)
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)


def check_dual_clip(clip_ratio_c: float | None) -> None:
    """Refuse a dual-clip bound that is not > 1 (`None`, dual clip off, passes)."""
    if clip_ratio_c is not None and not clip_ratio_c > 1:
        raise ValueError(f"clip_ratio_c must be > 1 (a bound above the unclipped ratio 1), got {clip_ratio_c}")


def clipped_surrogate(
    batch: MaskedBatch, low: float, high: float, clip_ratio_c: float | None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's `(B, T)` per-token clipped loss of `log_probs` against `old_log_probs`, and its metrics.

    The ratio is `exp(clamp(log_probs - old_log_probs, -20, 20))`; `low`/`high` are the clip ranges and
    `clip_ratio_c` the dual-clip bound (`None`: off). Metrics: `pg_clipfrac`, `pg_clipfrac_lower` (with
    dual clip) and `ppo_kl`, masked means over `batch.mask`.
    """
    log_ratio = clamped_log_ratio(batch)
    ratio = torch.exp(log_ratio)
    advantages = batch.advantages
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - low, 1 + high)
    per_token = torch.maximum(unclipped, clipped)
    metrics = {"pg_clipfrac": metric(clipped > unclipped, batch.mask)}
    if clip_ratio_c is not None:
        negative = advantages < 0
        dual = -advantages * clip_ratio_c
        metrics["pg_clipfrac_lower"] = metric((per_token > dual) & negative, batch.mask)
        per_token = torch.where(negative, torch.minimum(per_token, dual), per_token)
    metrics["ppo_kl"] = metric(-log_ratio, batch.mask)
    return per_token, metrics
