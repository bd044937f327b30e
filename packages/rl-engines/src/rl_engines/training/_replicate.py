"""`data_parallel="ddp"`: every rank holds the whole model; the ranks start from rank 0's weights and sum their
gradients after each backward.

Gradients are flattened into buckets of at most `GRADIENT_BUCKET_BYTES` (per dtype) and each bucket is summed
with one all-reduce, so a step pays a few collectives however many tensors the model has. They are summed, not
averaged, for the reason FSDP2's divide factor is 1 (`_fsdp.SUM_GRADIENTS`): every rank's loss is already divided
by the step's global counts. A parameter that received a gradient on some rank but not on another (a branch one
rank's data never took) contributes zeros there, so every rank reduces the same buckets; one that received none
anywhere keeps no gradient, as in one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from rl_engines.training._collectives import all_reduce_sum_

GRADIENT_BUCKET_BYTES = 64 * 2**20
"""64 MiB: large enough that a small model's gradients go in one collective, small beside a device's memory."""


def broadcast_rank0_weights(network: torch.nn.Module) -> None:
    """Overwrite every rank's parameters and buffers with rank 0's (a collective), so the replicas start equal
    whatever each rank's initialisation drew."""
    with torch.no_grad():
        for tensor in [*network.parameters(), *network.buffers()]:
            dist.broadcast(tensor.data, src=0)


def _buckets(tensors: Sequence[torch.Tensor], bucket_bytes: int) -> list[list[int]]:
    """Indices of `tensors` grouped by dtype and device into runs of at most `bucket_bytes` (a larger tensor alone)."""
    buckets: list[list[int]] = []
    open_buckets: dict[tuple[torch.dtype, torch.device], tuple[list[int], int]] = {}
    for index, tensor in enumerate(tensors):
        key = (tensor.dtype, tensor.device)
        members, size = open_buckets.get(key, ([], 0))
        if members and size + tensor.nbytes > bucket_bytes:
            buckets.append(members)
            members, size = [], 0
        open_buckets[key] = ([*members, index], size + tensor.nbytes)
    buckets.extend(members for members, _ in open_buckets.values() if members)
    return buckets


@overload
def all_reduce_gradients(
    parameters: Sequence[torch.nn.Parameter], riders: torch.Tensor, bucket_bytes: int = ...
) -> torch.Tensor: ...


@overload
def all_reduce_gradients(
    parameters: Sequence[torch.nn.Parameter], riders: None = None, bucket_bytes: int = ...
) -> None: ...


def all_reduce_gradients(
    parameters: Sequence[torch.nn.Parameter],
    riders: torch.Tensor | None = None,
    bucket_bytes: int = GRADIENT_BUCKET_BYTES,
) -> torch.Tensor | None:
    """Replace each parameter's gradient by its sum over ranks (see the module doc); every rank must call it with
    the same parameters in the same order. `riders`, a small tensor to be summed too (the step's loss), travel in
    the first bucket, in its dtype (float32 under ddp), and come back summed.

    Which parameters have a gradient anywhere travels in the first bucket's all-reduce as one 0/1 flag each, so a
    step costs one collective per bucket and nothing more."""
    trainable = [p for p in parameters if p.requires_grad]
    if not trainable:
        summed = None if riders is None else riders.clone()
        if summed is not None:
            all_reduce_sum_(summed)
        return summed
    had_grad = [p.grad is not None for p in trainable]
    for p in trainable:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    grads: list[torch.Tensor] = [p.grad for p in trainable]  # type: ignore[misc]
    buckets = _buckets(grads, bucket_bytes)
    flags = torch.tensor(had_grad, dtype=grads[buckets[0][0]].dtype, device=grads[buckets[0][0]].device)
    summed_riders = None if riders is None else riders.to(flags.device, flags.dtype, copy=True)
    for index, bucket in enumerate(buckets):
        members = [grads[i] for i in bucket]
        if index == 0:
            members += [flags] if summed_riders is None else [flags, summed_riders]
        flat = _flatten_dense_tensors(members)
        all_reduce_sum_(flat)
        for tensor, summed in zip(members, _unflatten_dense_tensors(flat, members), strict=True):
            tensor.copy_(summed)
    for p, anywhere in zip(trainable, flags.tolist(), strict=True):
        if not anywhere:
            p.grad = None
    return summed_riders
