"""Sums and gathers of small tensors over the default process group, at the cost of a few point-to-point messages.

Gloo's all-reduce runs a ring (a reduce-scatter, then an all-gather, each in several rounds), so on CPU a small
tensor costs it several times one exchange of the whole tensor with a peer (figures: bench/README.md). For a
small message and a power-of-two world, recursive doubling is cheaper: in round k every rank swaps its partial
result with rank `rank ^ 2**k`, log2(world) rounds in all. Each rank adds its own and its peer's values, and
floating-point addition is commutative, so every rank ends with bitwise the same sum, as replicas need. Larger
tensors, other worlds and other backends (nccl) keep the library's collectives.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

RECURSIVE_DOUBLING_MAX_BYTES = 4 * 2**20
"""Above ~4 MiB sending the whole tensor log2(world) times costs more than the ring's two passes save in latency."""

GLOO = "gloo"


def _recursive_doubling(tensor: torch.Tensor, message_bytes: int) -> bool:
    """Whether `tensor` goes by recursive doubling when the largest message of the collective has `message_bytes`."""
    world = dist.get_world_size()
    return (
        dist.get_backend() == GLOO
        and tensor.device.type == "cpu"
        and world & (world - 1) == 0
        and message_bytes <= RECURSIVE_DOUBLING_MAX_BYTES
    )


def _swap(mine: torch.Tensor, peer: int) -> torch.Tensor:
    """`mine` sent to `peer`, and `peer`'s tensor of the same shape received."""
    theirs = torch.empty_like(mine)
    sent = dist.isend(mine, peer)
    dist.recv(theirs, peer)
    if sent is not None:  # None only for a rank outside the group, which sends nothing
        sent.wait()
    return theirs


def all_reduce_sum_(tensor: torch.Tensor) -> None:
    """Replace `tensor` (any shape) in place by its sum over the ranks of the default group, identical on every rank."""
    if not (tensor.is_contiguous() and _recursive_doubling(tensor, tensor.nbytes)):
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return
    rank, world, distance = dist.get_rank(), dist.get_world_size(), 1
    while distance < world:
        tensor.add_(_swap(tensor, rank ^ distance))
        distance *= 2


def all_gather_stacked(values: torch.Tensor) -> torch.Tensor:
    """`(world, *values.shape)`: every rank's `values`, row `r` from rank `r`."""
    world = dist.get_world_size()
    # The last round sends half of the gathered rows.
    if not _recursive_doubling(values, world // 2 * values.nbytes):
        rows = [torch.empty_like(values) for _ in range(world)]
        dist.all_gather(rows, values.contiguous())
        return torch.stack(rows)
    rank, distance = dist.get_rank(), 1
    # After the round at `distance`, this rank holds the rows of the aligned block of `2 * distance` ranks it is in.
    held = values.unsqueeze(0).contiguous()
    while distance < world:
        peer = rank ^ distance
        theirs = _swap(held, peer)
        held = torch.cat([held, theirs] if rank < peer else [theirs, held])
        distance *= 2
    return held
