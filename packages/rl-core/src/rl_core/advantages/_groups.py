"""Vectorised per-group statistics of sequence scores, and the scalar-to-token broadcast shared by estimators."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl_core._groups import group_index, group_sum


@dataclass(frozen=True)
class GroupStats:
    """Statistics of `(B,)` scores grouped by prompt (a dataclass: a NamedTuple's `index` and `count` fields
    would shadow tuple's methods of those names).

    Attributes:
        index: `(B,)` int64 group of each sample, numbered 0..G-1.
        count: `(G,)` samples per group, in the scores' dtype.
        total: `(G,)` sum of the scores of each group.
        mean: `(G,)` group mean; 0 for a singleton group, which has no siblings to compare with.
        std: `(G,)` unbiased group standard deviation; 1 for a singleton group (so it passes unscaled).
    """

    index: torch.Tensor
    count: torch.Tensor
    total: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


def group_stats(scores: torch.Tensor, group_ids: torch.Tensor) -> GroupStats:
    """Count, sum, mean and unbiased std of `(B,)` float scores within each group of `(B,)` integer ids."""
    index, num_groups = group_index(group_ids)
    count = group_sum(torch.ones_like(scores), index, num_groups)
    total = group_sum(scores, index, num_groups)
    singleton = count == 1
    mean = torch.where(singleton, torch.zeros_like(total), total / count)
    # Two passes (centre, then square) rather than E[x^2] - E[x]^2, which cancels badly for close scores.
    centred = scores - (total / count)[index]
    sum_sq = group_sum(centred * centred, index, num_groups)
    std = torch.where(singleton, torch.ones_like(total), (sum_sq / (count - 1).clamp(min=1)).sqrt())
    return GroupStats(index, count, total, mean, std)


def outcome_scores(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The `(B,)` sum of `(B, T)` rewards over the `(B, T)` bool mask; values under a zero mask never count."""
    # torch.where, not multiplication: a NaN/inf under a zero mask must not leak into the sum.
    return torch.where(mask, rewards, torch.zeros((), dtype=rewards.dtype, device=rewards.device)).sum(dim=-1)


def broadcast_to_tokens(per_sequence: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Spread a `(B,)` per-sequence value over the tokens of a `(B, T)` bool mask; zero elsewhere."""
    zero = torch.zeros((), dtype=per_sequence.dtype, device=per_sequence.device)
    return torch.where(mask, per_sequence.unsqueeze(-1), zero)
