"""Group Sequence Policy Optimization (Zheng et al. 2025, https://arxiv.org/abs/2507.18071)."""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import clip_range, masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO_LOW = 3e-4
"""GSPO's paper clips the (length-normalised) sequence ratio far tighter than PPO clips token ratios."""

DEFAULT_CLIP_RATIO_HIGH = 4e-4

MAX_LOG_RATIO = 10.0
"""verl caps the combined log-ratio at 10 before `exp` (exp(10) ~ 2.2e4)."""


@register_policy_loss("gspo")
def gspo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio_low: float = DEFAULT_CLIP_RATIO_LOW,
    clip_ratio_high: float = DEFAULT_CLIP_RATIO_HIGH,
) -> PolicyLossOutput:
    """GSPO's clipped loss on the sequence-level importance ratio, as verl's `gspo` loss.

    The sequence ratio is the geometric mean of the token ratios,
    `s_i = exp(mean_t(log_probs - old_log_probs))` over the sequence's response tokens. Each token uses
    `s_it = sg(s_i) * pi(y_t) / sg(pi(y_t))` (value `s_i`, gradient through its own log-prob only;
    `sg` is stop-gradient), capped at `exp(10)`, in PPO's clipped surrogate
    `max(-A * s_it, -A * clip(s_it, 1 - clip_ratio_low, 1 + clip_ratio_high))`.
    The paper aggregates with "seq-mean-token-mean".

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio_low: >= 0, lower clip range of the sequence ratio.
        clip_ratio_high: >= 0, upper clip range of the sequence ratio.

    Returns:
        The loss and `pg_clipfrac`, `ppo_kl`.
    """
    low, high = clip_range(0.0, clip_ratio_low, clip_ratio_high)
    batch = masked_batch(inputs)
    log_ratio = batch.log_probs - batch.old_log_probs
    lengths = batch.mask.sum(dim=-1).clamp(min=1)
    sequence_log_ratio = log_ratio.sum(dim=-1) / lengths
    log_probs = batch.log_probs
    combined = log_probs - log_probs.detach() + sequence_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(combined.clamp(max=MAX_LOG_RATIO))
    unclipped = -batch.advantages * ratio
    clipped = -batch.advantages * ratio.clamp(1 - low, 1 + high)
    per_token = torch.maximum(unclipped, clipped)
    metrics = {"pg_clipfrac": metric(clipped > unclipped, batch.mask), "ppo_kl": metric(-log_ratio, batch.mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
