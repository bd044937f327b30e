"""Pieces every policy loss shares: the masked view of a batch, ratio helpers, parameter checks and the reduction."""

from __future__ import annotations

from typing import NamedTuple

import torch

from rl_core._validation import check_positive
from rl_core.losses._aggregation import LossNormalizer, aggregate_loss
from rl_core.losses._types import PolicyLossInputs

LOG_RATIO_BOUND = 20.0
"""verl clamps token log-ratios to +-20 before `exp`: exp(20) ~ 4.9e8 stays finite in float32 and bfloat16."""


class MaskedBatch(NamedTuple):
    """The tensors of a `PolicyLossInputs` with every position under a zero mask set to exactly 0.

    Zeroing with `torch.where` up front keeps NaN/inf planted under the mask out of every later
    computation, and makes the gradient with respect to `log_probs` exactly 0 at those positions.
    """

    log_probs: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor | None
    mask: torch.Tensor


def _zero_off_mask(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, values, values.new_zeros(()))


def masked_batch(inputs: PolicyLossInputs) -> MaskedBatch:
    """The masked view of `inputs` (see `MaskedBatch`)."""
    mask = inputs.mask
    weights = inputs.rollout_is_weights
    return MaskedBatch(
        _zero_off_mask(inputs.log_probs, mask),
        _zero_off_mask(inputs.old_log_probs, mask),
        _zero_off_mask(inputs.advantages, mask),
        None if weights is None else _zero_off_mask(weights, mask),
        mask,
    )


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `(B, T)` values over the true entries of the `(B, T)` bool mask (0 when it has none)."""
    total = torch.where(mask, values, values.new_zeros(())).sum()
    return total / mask.sum().clamp(min=1)


def metric(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A detached masked mean, in the values' floating dtype (bool values count as 0/1)."""
    values = values.detach()
    if not values.is_floating_point():
        values = values.to(torch.get_default_dtype())
    return masked_mean(values, mask)


def clamped_log_ratio(batch: MaskedBatch) -> torch.Tensor:
    """`log_probs - old_log_probs`, clamped to +-`LOG_RATIO_BOUND` as verl does before exponentiating."""
    return (batch.log_probs - batch.old_log_probs).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def clip_range(clip_ratio: float, clip_ratio_low: float | None, clip_ratio_high: float | None) -> tuple[float, float]:
    """The (low, high) clip ratios: each override, or the symmetric `clip_ratio`; all must be >= 0."""
    check_positive("clip_ratio", clip_ratio, allow_zero=True)
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    check_positive("clip_ratio_low", low, allow_zero=True)
    check_positive("clip_ratio_high", high, allow_zero=True)
    return low, high


def reduce(
    per_token: torch.Tensor, batch: MaskedBatch, aggregation: str, normalizer: LossNormalizer | None
) -> torch.Tensor:
    """Weight the `(B, T)` per-token loss by the rollout IS weights (if any) and aggregate it to a scalar."""
    if batch.weights is not None:
        per_token = per_token * batch.weights
    return aggregate_loss(per_token, batch.mask, aggregation, normalizer)
