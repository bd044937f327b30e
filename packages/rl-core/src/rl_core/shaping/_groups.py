"""Group bookkeeping shared by the shaping functions: contiguous group numbers and per-group sums."""

from __future__ import annotations

import torch


def group_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map `(B,)` arbitrary integer ids to `(B,)` group numbers 0..G-1 (sorted by id); also return G."""
    unique, inverse = torch.unique(group_ids, return_inverse=True)
    return inverse, unique.numel()


def group_sum(values: torch.Tensor, index: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Sum `(B, ...)` values into `(num_groups, ...)` by the `(B,)` group numbers in `index`."""
    out = torch.zeros((num_groups, *values.shape[1:]), dtype=values.dtype, device=values.device)
    return out.index_add_(0, index, values)


def group_mean_and_std(
    values: torch.Tensor, index: torch.Tensor, num_groups: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count, mean and population std (divisor n) of `(B, ...)` values per group; empty groups get 0 for all three."""
    ones = torch.ones(values.shape[0], dtype=values.dtype, device=values.device)
    count = group_sum(ones, index, num_groups)
    count_b = count.reshape(num_groups, *([1] * (values.dim() - 1)))
    mean = group_sum(values, index, num_groups) / count_b.clamp(min=1)
    # Two passes (centre, then square) rather than E[x^2] - E[x]^2, which cancels badly for close values.
    centred = values - mean[index]
    std = (group_sum(centred * centred, index, num_groups) / count_b.clamp(min=1)).sqrt()
    return count, mean, std
