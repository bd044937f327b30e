"""Karmarkar–Karp largest differencing for k-way partitioning, equal-size and unconstrained."""

from __future__ import annotations

import gc
import heapq
from collections.abc import Generator, Hashable, Sequence
from contextlib import contextmanager
from operator import add, itemgetter

import torch

from rl_core.balancing._driver import register_method, run_partition
from rl_core.balancing._partition import Number, Partition
from rl_core.balancing._refine import refine_by_swaps

# A partial partition (state) is three equal-length tuples, (sums, heads, tails), describing its non-empty sets
# sorted by sum, largest first; the remaining k - len(sums) sets are implicitly empty. A set's items form a
# linked list from its head to its tail; merging two sets only records a (tail, head) link, so a merge costs
# O(k) whatever the set sizes, and the links are resolved once at the end. Every step of a merge is a C-level
# operation on whole tuples (map, slicing, sorted, itemgetter) rather than a Python loop over the sets.

State = tuple[tuple[Number, ...], tuple[int, ...], tuple[int, ...]]
_Entry = tuple[Number, Number, int, State]
"""A heap entry: (-spread, -largest sum, creation counter, state)."""


def _merge(a: State, b: State, k: int, link_from: list[int], link_to: list[int]) -> State:
    """Pair a's i-th largest set with b's i-th smallest (empty sets included), record the links, re-sort."""
    sums_a, heads_a, tails_a = a
    sums_b, heads_b, tails_b = b
    if len(sums_a) == len(sums_b) == k:  # both full: the only case of equal-size, and most merges otherwise
        link_from.extend(tails_a)
        link_to.extend(reversed(heads_b))
        sums = tuple(map(add, sums_a, reversed(sums_b)))
        heads, tails = heads_a, tails_b[::-1]
    else:
        sums_b, heads_b, tails_b = sums_b[::-1], heads_b[::-1], tails_b[::-1]  # b smallest first
        first = k - len(sums_b)  # a's sets before `first` meet b's empty sets
        overlap = max(0, len(sums_a) - first)
        link_from.extend(tails_a[first:])
        link_to.extend(heads_b[:overlap])
        sums = sums_a[:first] + tuple(map(add, sums_a[first:], sums_b[:overlap])) + sums_b[overlap:]
        heads = heads_a + heads_b[overlap:]
        tails = tails_a[:first] + tails_b
    if len(sums) == 1:
        return sums, heads, tails
    pick = itemgetter(*sorted(range(len(sums)), key=sums.__getitem__, reverse=True))
    return pick(sums), pick(heads), pick(tails)


def _initial_states(w: Sequence[Number], k: int, equal_size: bool) -> list[_Entry]:
    """Heap entries (-spread, -largest sum, counter, state) of the starting states."""
    n = len(w)
    order = sorted(range(n), key=w.__getitem__, reverse=True)
    if equal_size:
        # Each starting state is k consecutive items of the sorted order, one per set: every merge then keeps
        # the sets' item counts equal.
        sorted_w = tuple(map(w.__getitem__, order))
        order_t = tuple(order)
        entries: list[_Entry] = []
        for start in range(0, n, k):
            sums, items = sorted_w[start : start + k], order_t[start : start + k]
            entries.append((sums[-1] - sums[0], -sums[0], start, (sums, items, items)))
        return entries
    # A single item's state has spread w (its other k - 1 sets are empty).
    return [(-w[i], -w[i], c, ((w[i],), (i,), (i,))) for c, i in enumerate(order)]


@contextmanager
def _gc_paused() -> Generator[None, None, None]:
    """Pause the cyclic garbage collector, restoring its state after.

    Differencing allocates O(n) short-lived tuples that can form no cycle; each burst of allocations triggers
    collections that scan every object of the process (all of torch's in a trainer), which cost more than the
    algorithm itself. Only the call that paused it resumes it; a concurrent call then merely runs with it on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def karmarkar_karp_core(
    w: Sequence[Number], k: int, equal_size: bool, refine: bool = True
) -> tuple[list[list[int]], list[Number]]:
    """k index lists and their loads by largest differencing; `w` checked, len(w) >= k (and divisible if equal)."""
    with _gc_paused():
        parts, loads = _difference(w, k, equal_size)
    if refine:
        return refine_by_swaps(w, parts, loads, allow_moves=not equal_size)
    return parts, loads


def _difference(w: Sequence[Number], k: int, equal_size: bool) -> tuple[list[list[int]], list[Number]]:
    n = len(w)
    # Heap entries: (-spread, -largest sum, creation counter, state); the unique counter makes ties
    # deterministic and keeps comparisons off the states. The largest spread is differenced first.
    heap = _initial_states(w, k, equal_size)
    heapq.heapify(heap)
    # Parallel lists rather than (tail, head) tuples: no per-link allocation for the garbage collector to scan.
    link_from: list[int] = []
    link_to: list[int] = []
    counter = n
    pop, push = heapq.heappop, heapq.heappush
    while len(heap) > 1:
        state = _merge(pop(heap)[3], pop(heap)[3], k, link_from, link_to)
        sums = state[0]
        spread = sums[0] - sums[-1] if len(sums) == k else sums[0]
        push(heap, (-spread, -sums[0], counter, state))
        counter += 1
    sums, heads, _ = heap[0][3]
    next_item = dict(zip(link_from, link_to, strict=True))
    parts: list[list[int]] = []
    for head in heads:
        part = [head]
        item = next_item.get(head)
        while item is not None:
            part.append(item)
            item = next_item.get(item)
        parts.append(part)
    return parts, list(sums)


@register_method("karmarkar_karp")
def _karmarkar_karp_refined(w: list[Number], k: int, equal_size: bool) -> tuple[list[list[int]], list[Number]]:
    return karmarkar_karp_core(w, k, equal_size, refine=True)


def karmarkar_karp(
    workloads: Sequence[Number] | torch.Tensor,
    num_parts: int,
    *,
    equal_size: bool = False,
    group_ids: Sequence[Hashable] | torch.Tensor | None = None,
    refine: bool = True,
) -> Partition:
    """Split items into `num_parts` parts of near-equal summed workload (Karmarkar–Karp largest differencing).

    Args:
        workloads: `(n,)` finite numbers >= 0, one per item.
        num_parts: k >= 1, at most n (or the number of groups).
        equal_size: every part gets n/k items (n divisible by k; with `group_ids`, equal group sizes and a
            group count divisible by k).
        group_ids: `(n,)` hashable ids; items sharing an id stay in the same part.
        refine: after differencing, swap (or, unconstrained, move) items between the heaviest and the
            lightest parts while that lowers the heaviest load; never makes the result worse.
    """

    def core(w: list[Number], k: int, eq: bool) -> tuple[list[list[int]], list[Number]]:
        return karmarkar_karp_core(w, k, eq, refine=refine)

    return run_partition(core, workloads, num_parts, equal_size=equal_size, group_ids=group_ids)
