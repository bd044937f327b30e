"""A 2-rank gloo scenario: batched gathering of row-sharded DTensors against `DTensor.full_tensor`, one by one."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from rl_engines.training._gather import gather_full_tensors

SHAPES = [(5, 3), (1, 4), (4,), (7, 2, 3), (2, 2), (3, 5)]
"""Odd row counts (the last rank holds fewer rows), one row (the second rank holds none), a vector, a 3-D tensor."""
DTYPES = [torch.float32, torch.bfloat16, torch.float32, torch.float32, torch.int64, torch.float32]


def gather_scenario(rank: int, out: Path) -> None:
    """Each tensor gathered as FSDP2 would shard it (plus one replicated), batched and one by one; saved per rank."""
    mesh = init_device_mesh("cpu", (2,))
    generator = torch.Generator().manual_seed(0)
    originals = [
        (torch.randn(shape, generator=generator) * 100).to(dtype) for shape, dtype in zip(SHAPES, DTYPES, strict=True)
    ]
    placements = [[Shard(0)]] * (len(SHAPES) - 1) + [[Replicate()]]
    dtensors = [distribute_tensor(t, mesh, p) for t, p in zip(originals, placements, strict=True)]
    batched = gather_full_tensors(dtensors)
    one_by_one = [d.full_tensor() for d in dtensors]
    torch.save({"originals": originals, "batched": batched, "one_by_one": one_by_one}, out / f"gather_rank{rank}.pt")
