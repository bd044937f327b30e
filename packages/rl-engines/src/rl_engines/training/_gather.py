"""Full tensors of many FSDP2 shards in one collective per dtype, instead of one per tensor.

FSDP2 shards every parameter on dim 0 of a 1-D mesh the way `torch.chunk` does (ranks hold `ceil(n / world)`
rows each, the last ones fewer or none). Each rank pads its shards to those chunk sizes, lays them end to end in
one flat buffer, and one `all_gather` brings every rank's buffer; the full tensors are cut back out of it. A
weight sync of a model with hundreds of tensors then pays for a handful of collectives, not hundreds (figures:
bench/README.md). Tensors sharded any other way fall back to `DTensor.full_tensor()`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeGuard

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard

from rl_engines.training._fsdp import full_tensor


def _row_sharded(tensor: torch.Tensor) -> TypeGuard[DTensor]:
    """Whether `tensor` is a DTensor split on dim 0 of a 1-D mesh (the same answer on every rank)."""
    return (
        isinstance(tensor, DTensor)
        and tensor.dim() > 0
        and tensor.device_mesh.ndim == 1
        and tuple(tensor.placements) == (Shard(0),)
    )


def _rows_of_rank(rows: int, world: int, rank: int) -> int:
    """How many of `rows` rows `torch.chunk` gives `rank` of `world`."""
    chunk = -(-rows // world)
    return max(0, min(rows, (rank + 1) * chunk) - rank * chunk)


def _gather_group(tensors: Sequence[DTensor]) -> list[torch.Tensor]:
    """Full tensors of row-sharded DTensors that share one dtype and one mesh, with a single all_gather."""
    mesh = tensors[0].device_mesh
    world, rank = mesh.size(), mesh.get_local_rank()
    pieces = []
    for tensor in tensors:
        row_numel = math.prod(tensor.shape[1:])
        local = tensor.to_local()
        if local.shape[0] != _rows_of_rank(tensor.shape[0], world, rank):
            raise RuntimeError(
                f"a {tuple(tensor.shape)} shard holds {local.shape[0]} rows on rank {rank} of {world}, not the "
                "torch.chunk split this gather assumes; FSDP2's sharding changed"
            )
        padded = local.new_zeros(-(-tensor.shape[0] // world) * row_numel)
        padded[: local.numel()] = local.reshape(-1)
        pieces.append(padded)
    flat = torch.cat(pieces)
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat, group=mesh.get_group())
    results = []
    offset = 0
    for tensor, piece in zip(tensors, pieces, strict=True):
        row_numel = math.prod(tensor.shape[1:])
        parts = [
            gathered[r][offset : offset + _rows_of_rank(tensor.shape[0], world, r) * row_numel] for r in range(world)
        ]
        results.append(torch.cat(parts).reshape(tensor.shape))
        offset += piece.numel()
    return results


def gather_full_tensors(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The whole tensors, in order: one all_gather per (mesh, dtype) for FSDP2 row shards, the rest one by one.

    A collective: every rank of the tensors' mesh must call it with the same list of tensors.
    """
    results: dict[int, torch.Tensor] = {}
    groups: dict[tuple[int, torch.dtype], list[int]] = {}
    sharded: dict[int, DTensor] = {}
    for index, tensor in enumerate(tensors):
        if _row_sharded(tensor):
            sharded[index] = tensor
            groups.setdefault((id(tensor.device_mesh), tensor.dtype), []).append(index)
        else:
            results[index] = full_tensor(tensor)
    for indices in groups.values():
        results.update(zip(indices, _gather_group([sharded[i] for i in indices]), strict=True))
    return [results[index] for index in range(len(tensors))]
