"""Gloo scenarios of `_collectives`: each rank saves what the small-tensor collectives returned to it."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from rl_engines.training._collectives import RECURSIVE_DOUBLING_MAX_BYTES, all_gather_stacked, all_reduce_sum_

SHAPE = (3, 5)


def rank_values(rank: int, shape: tuple[int, ...] = SHAPE) -> torch.Tensor:
    """What rank `rank` contributes: values of mixed magnitude, so the order of additions shows in the bits."""
    generator = torch.Generator().manual_seed(rank)
    return torch.randn(shape, generator=generator) * 10.0 ** torch.randint(-6, 6, shape, generator=generator)


def _refuse_library_collectives(*_: object, **__: object) -> None:
    raise AssertionError("a small tensor on a power-of-two gloo world went through gloo's own collective")


def collectives_scenario(rank: int, out: Path) -> None:
    """A small sum, an integer sum and a gather (on a power-of-two world with gloo's own all-reduce and all-gather
    refused, so they must go by recursive doubling), then a sum too large for it; saved for the test."""
    world = dist.get_world_size()
    library = dist.all_reduce, dist.all_gather
    if world & (world - 1) == 0:
        dist.all_reduce = dist.all_gather = _refuse_library_collectives
    try:
        small = rank_values(rank)
        all_reduce_sum_(small)
        counts = torch.tensor([rank + 1, 10 * rank], dtype=torch.int64)
        all_reduce_sum_(counts)
        gathered = all_gather_stacked(torch.tensor([float(rank), -float(rank)]))
    finally:
        dist.all_reduce, dist.all_gather = library
    large = rank_values(rank, (RECURSIVE_DOUBLING_MAX_BYTES // 4 + 1,))
    all_reduce_sum_(large)
    torch.save(
        {"small": small, "large_head": large[:16].clone(), "counts": counts, "gathered": gathered},
        out / f"collectives_rank{rank}.pt",
    )
