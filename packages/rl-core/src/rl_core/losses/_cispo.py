"""Clipped IS-weight Policy Optimization (MiniMax-M1, 2025, https://arxiv.org/abs/2506.13585)."""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import clamped_log_ratio, clip_range, masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO = 0.2
"""verl's default clip range; the paper clips only above, i.e. sets a large `clip_ratio_low`."""


@register_policy_loss("cispo")
def cispo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
) -> PolicyLossOutput:
    """CISPO's loss `-sg(clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high)) * A * log_probs`, as verl's `cispo`.

    `r = exp(clamp(log_probs - old_log_probs, -20, 20))` and `sg` is stop-gradient: the clipped
    importance weight scales a REINFORCE gradient, so no token's gradient is dropped by clipping.

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: >= 0, symmetric clip range.
        clip_ratio_low: >= 0, lower clip range; defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range; defaults to `clip_ratio`.

    Returns:
        The loss and `pg_clipfrac` (tokens whose weight was clipped), `ppo_kl`.
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    batch = masked_batch(inputs)
    log_ratio = clamped_log_ratio(batch)
    ratio = torch.exp(log_ratio)
    weight = ratio.clamp(1 - low, 1 + high)
    per_token = -weight.detach() * batch.advantages * batch.log_probs
    metrics = {"pg_clipfrac": metric(ratio != weight, batch.mask), "ppo_kl": metric(-log_ratio, batch.mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
