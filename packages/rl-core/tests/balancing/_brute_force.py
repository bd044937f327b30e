"""Exhaustive references for small inputs: every assignment of items to parts is tried."""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def optimal_max_load(workloads: Sequence[float], k: int, *, equal_size: bool = False) -> float:
    """The smallest possible heaviest-part load over all splits into k non-empty parts (equal counts if asked)."""
    n = len(workloads)
    best = float("inf")
    for assignment in itertools.product(range(k), repeat=n):
        counts = [0] * k
        loads = [0.0] * k
        for item, part in enumerate(assignment):
            counts[part] += 1
            loads[part] += workloads[item]
        if min(counts) == 0 or (equal_size and len(set(counts)) > 1):
            continue
        best = min(best, max(loads))
    return best


def min_bins(token_counts: Sequence[int], capacity: int) -> int:
    """The fewest bins of `capacity` that hold every count (each count <= capacity)."""
    for bins in range(1, len(token_counts) + 1):
        for assignment in itertools.product(range(bins), repeat=len(token_counts)):
            loads = [0] * bins
            for item, b in enumerate(assignment):
                loads[b] += token_counts[item]
            if max(loads) <= capacity:
                return bins
    raise AssertionError("unreachable: one bin per item always fits")


def assert_is_partition(parts: list[list[int]], n: int) -> None:
    """Every index in range(n) appears exactly once, each part ascending and non-empty."""
    assert sorted(i for part in parts for i in part) == list(range(n))
    for part in parts:
        assert part, "empty part"
        assert part == sorted(part)
