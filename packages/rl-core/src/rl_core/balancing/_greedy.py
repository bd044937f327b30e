"""Greedy LPT (longest processing time first): largest item to the currently lightest part."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

import torch

from rl_core.balancing._driver import register_method, run_partition
from rl_core.balancing._partition import Number, Partition


@register_method("lpt")
def lpt_core(w: Sequence[Number], k: int, equal_size: bool) -> tuple[list[list[int]], list[Number]]:
    """k index lists and their loads by LPT; `w` checked, len(w) >= k (and divisible by k if equal_size).

    With equal_size a part that holds n/k items leaves the heap, so the next item goes to the lightest part
    that still has room.
    """
    n = len(w)
    capacity = n // k if equal_size else n
    parts: list[list[int]] = [[] for _ in range(k)]
    loads: list[Number] = [0] * k
    # (load, part) pairs: ties go to the lower part index, which keeps the result deterministic.
    heap: list[tuple[Number, int]] = [(0, p) for p in range(k)]
    for i in sorted(range(n), key=w.__getitem__, reverse=True):
        load, p = heap[0]
        parts[p].append(i)
        loads[p] = load + w[i]
        if len(parts[p]) < capacity:
            heapq.heapreplace(heap, (loads[p], p))
        else:
            heapq.heappop(heap)
    return parts, loads


def greedy_lpt(
    workloads: Sequence[Number] | torch.Tensor,
    num_parts: int,
    *,
    equal_size: bool = False,
    group_ids: Sequence[Hashable] | torch.Tensor | None = None,
) -> Partition:
    """Split items into `num_parts` parts by longest-processing-time-first greedy assignment.

    Unconstrained, the heaviest part is at most (4/3 - 1/(3k)) times the optimum (Graham, 1969).

    Args:
        workloads: `(n,)` finite numbers >= 0, one per item.
        num_parts: k >= 1, at most n (or the number of groups).
        equal_size: every part gets n/k items (n divisible by k; with `group_ids`, equal group sizes and a
            group count divisible by k).
        group_ids: `(n,)` hashable ids; items sharing an id stay in the same part.
    """
    return run_partition(lpt_core, workloads, num_parts, equal_size=equal_size, group_ids=group_ids)
