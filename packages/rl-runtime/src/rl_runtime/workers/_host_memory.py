"""Keep freed host memory in the worker's heap instead of handing it back to the OS after every step.

glibc serves allocations above its mmap threshold (128 KiB at first) with fresh `mmap`s and trims freed memory at the
heap's top, so the tensors a CPU training step allocates and frees (thousands of 0.1-1 MiB activations) come back as
new pages each step, each first touch a page fault: a tenth of the embedded model's training step on 2 cores. With
both thresholds raised the heap keeps its high-water mark and reuses it; the cost is that the process's resident
memory no longer shrinks after a peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
"""mallopt parameters (glibc's malloc.h)."""
MMAP_THRESHOLD_BYTES = 32 * 2**20
"""glibc's largest mmap threshold on 64-bit: allocations up to it come from the heap."""
TRIM_THRESHOLD_BYTES = 2**31 - 1
"""The largest value mallopt takes (a C int): up to 2 GiB free at the heap's top stays with the process."""


def retain_freed_host_memory() -> bool:
    """Raise glibc's mmap and trim thresholds in this process (see the module doc); whether it applied (False on
    a C library without `mallopt`)."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        logger.info("host memory is managed by the C library's defaults: it has no mallopt")
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    trim = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    mmap = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    return bool(trim and mmap)
