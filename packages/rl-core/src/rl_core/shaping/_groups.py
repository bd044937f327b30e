"""Per-group mean and population std shared by the shaping functions."""

from __future__ import annotations

import torch

from rl_core._groups import group_sum


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
