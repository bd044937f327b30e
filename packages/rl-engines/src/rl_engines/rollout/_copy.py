"""Copying tensor bytes on CPU without torch's intra-op thread pool.

Weight sync copies run in two processes at once (the trainer packing one bucket while the engine copies
the previous one out). torch's parallel copy wakes its OpenMP team in each process, and two spinning teams
on the same cores slow each copy down several times. A single-threaded `memmove` (which releases the GIL)
is memory-bound at the same speed on this class of machine and does not contend.
"""

from __future__ import annotations

import ctypes

import torch


def copy_into(dst: torch.Tensor, src: torch.Tensor) -> None:
    """`dst.copy_(src)`, as one `memmove` when both are contiguous CPU tensors of one dtype and shape."""
    plain = (
        dst.device.type == "cpu"
        and src.device.type == "cpu"
        and dst.dtype == src.dtype
        and dst.shape == src.shape
        and dst.is_contiguous()
        and src.is_contiguous()
    )
    if plain:
        if dst.nbytes:
            ctypes.memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes)
    else:
        dst.copy_(src)
