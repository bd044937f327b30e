"""Whitening over the masked tokens of a batch (verl's `masked_whiten`)."""

from __future__ import annotations

import torch

from rl_core._validation import as_bool_mask, check_tensor
from rl_core.schema import VALUES

_VARIANCE_EPSILON = 1e-8
"""Added to the variance before the inverse square root, so a constant batch whitens to 0, not NaN."""


def whiten(values: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True) -> torch.Tensor:
    """Scale `values` to zero mean and unit (Bessel-corrected) variance over the masked tokens.

    Args:
        values: `(B, T)` float values; entries under a zero mask never affect the result.
        mask: `(B, T)` 0/1 or bool mask of the tokens whose statistics count (at least two).
        shift_mean: when False the mean is added back after scaling (only the spread is normalised).

    Returns:
        `(B, T)` whitened values, zero where `mask` is 0.
    """
    dims: dict[str, int] = {}
    check_tensor(VALUES, values, ("B", "T"), dims=dims, floating=True)
    check_tensor("mask", mask, ("B", "T"), dims=dims)
    keep = as_bool_mask("mask", mask)
    count = int(keep.sum())
    if count < 2:
        raise ValueError(f"whiten needs at least 2 masked tokens for an unbiased variance, got {count}")
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    kept = torch.where(keep, values, zero)
    mean = kept.sum() / count
    centred = torch.where(keep, values - mean, zero)
    variance = (centred * centred).sum() / (count - 1)
    whitened = centred * torch.rsqrt(variance + _VARIANCE_EPSILON)
    if not shift_mean:
        whitened = torch.where(keep, whitened + mean, zero)
    return whitened
