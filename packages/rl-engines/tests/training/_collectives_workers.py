"""Gloo scenarios of `_collectives`: each rank saves what the small-tensor collectives returned to it."""

from __future__ import annotations

from pathlib import Path

import torch

from rl_engines.training._collectives import RECURSIVE_DOUBLING_MAX_BYTES, all_gather_stacked, all_reduce_sum_

SHAPE = (3, 5)


def rank_values(rank: int, shape: tuple[int, ...] = SHAPE) -> torch.Tensor:
    """What rank `rank` contributes: values of mixed magnitude, so the order of additions shows in the bits."""
    generator = torch.Generator().manual_seed(rank)
    return torch.randn(shape, generator=generator) * 10.0 ** torch.randint(-6, 6, shape, generator=generator)


def collectives_scenario(rank: int, out: Path) -> None:
    """A small sum, a sum too large for recursive doubling, an integer sum and a gather; saved for the test."""
    small = rank_values(rank)
    all_reduce_sum_(small)
    large = rank_values(rank, (RECURSIVE_DOUBLING_MAX_BYTES // 4 + 1,))
    all_reduce_sum_(large)
    counts = torch.tensor([rank + 1, 10 * rank], dtype=torch.int64)
    all_reduce_sum_(counts)
    gathered = all_gather_stacked(torch.tensor([float(rank), -float(rank)]))
    torch.save(
        {"small": small, "large_head": large[:16].clone(), "counts": counts, "gathered": gathered},
        out / f"collectives_rank{rank}.pt",
    )
