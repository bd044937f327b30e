"""PPO's clipped value loss (the critic's regression onto the returns)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.losses._aggregation import LossNormalizer, aggregate_loss
from rl_core.losses._common import metric
from rl_core.schema import RESPONSE_MASK, RETURNS, VALUES

_HALF = 0.5
"""The squared error's conventional 1/2, so the gradient is the plain error."""


class ValueLossOutput(NamedTuple):
    """The value loss (0-dim) and `clipfrac`: the detached fraction of response tokens where the clipped
    error was the larger one."""

    loss: torch.Tensor
    clipfrac: torch.Tensor


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_range: float,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
) -> ValueLossOutput:
    """`0.5 * max((v - R)^2, (clip(v, v_old - c, v_old + c) - R)^2)`, aggregated, as verl's `compute_value_loss`.

    Args:
        values: `(B, T)` float predictions of the critic being trained.
        old_values: `(B, T)` float predictions of the critic that collected the batch.
        returns: `(B, T)` float regression targets.
        response_mask: `(B, T)` 0/1 or bool mask of the tokens that count; nothing under a zero mask
            reaches the loss, its gradient or `clipfrac`, NaN included.
        clip_range: > 0, how far a prediction may move from `old_values` before its error stops
            shrinking the loss (`inf` turns clipping off).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
    """
    if not clip_range > 0:
        raise ValueError(f"clip_range must be > 0, got {clip_range}")
    dims: dict[str, int] = {}
    check_tensor(VALUES, values, ("B", "T"), dims=dims, floating=True)
    check_tensor("old_values", old_values, ("B", "T"), dims=dims, floating=True)
    check_tensor(RETURNS, returns, ("B", "T"), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    check_same_device(values=values, old_values=old_values, returns=returns, response_mask=response_mask)
    mask = as_bool_mask(RESPONSE_MASK, response_mask)
    zero = values.new_zeros(())
    values, old_values, returns = (torch.where(mask, t, zero) for t in (values, old_values, returns))
    clipped_values = torch.clamp(values, old_values - clip_range, old_values + clip_range)
    unclipped_error = (values - returns).square()
    clipped_error = (clipped_values - returns).square()
    per_token = _HALF * torch.maximum(unclipped_error, clipped_error)
    loss = aggregate_loss(per_token, mask, aggregation, normalizer)
    return ValueLossOutput(loss, metric(clipped_error > unclipped_error, mask))
