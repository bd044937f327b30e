"""Local search after a partition: swap items between the heaviest part and light parts to lower the maximum."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from rl_core.balancing._partition import Number

REFINE_TOLERANCE = 1e-4
"""Stop once the heaviest part is within 0.01 % of the mean: further swaps cost time and buy nothing a training
step can measure."""
MAX_ROUNDS_PER_PART = 4
"""At most 4·k improving swaps; on skewed inputs differencing leaves about one part in two to fix."""
MAX_PARTNERS = 8
"""Light parts tried per round before giving up; the lightest almost always admits a swap, and trying every part
would cost O(n log n) per round."""


def _best_exchange(
    heavy: list[Number], light: list[Number], gap: Number, allow_moves: bool, slack: float
) -> tuple[int, int, Number]:
    """(index in heavy, index in light or -1 for a move, gain) of the exchange whose delta is nearest gap/2.

    Moving delta = x - y from the heavy part to the light one lowers the heavy load while
    0 < delta < gap; the closer delta is to gap/2, the lower max(heavy - delta, light + delta).
    Gain is min(delta, gap - delta), 0 when no exchange helps. The search stops at the first gain within
    `slack` of gap/2.
    """
    half = gap / 2
    good_enough = half - slack if half > slack else half
    n_light = len(light)
    best: Number = 0
    best_x = best_y = -1
    for xi, x in enumerate(heavy):
        j = bisect_left(light, x - half)
        for yi in (j - 1, j):
            if 0 <= yi < n_light:
                delta = x - light[yi]
                if 0 < delta < gap:
                    gain = delta if delta < gap - delta else gap - delta
                    if gain > best:
                        best, best_x, best_y = gain, xi, yi
        if allow_moves and 0 < x < gap:
            gain = x if x < gap - x else gap - x
            if gain > best:
                best, best_x, best_y = gain, xi, -1
        if best >= good_enough:
            break
    return best_x, best_y, best


def _partners(loads: list[Number]) -> Iterator[int]:
    """The lightest part, then (only if asked for) the next lightest ones, up to MAX_PARTNERS in all."""
    lightest = loads.index(min(loads))
    yield lightest
    for p in sorted(range(len(loads)), key=loads.__getitem__)[:MAX_PARTNERS]:
        if p != lightest:
            yield p


def refine_by_swaps(
    w: Sequence[Number], parts: list[list[int]], loads: list[Number], *, allow_moves: bool
) -> tuple[list[list[int]], list[Number]]:
    """Lower the heaviest load by exchanges with light parts; item counts stay equal unless `allow_moves`.

    Each accepted exchange strictly lowers the heaviest part and leaves the light part below the old maximum,
    so the maximum load never increases. Returns new (parts, loads); the inputs are not modified.
    """
    k = len(parts)
    total = sum(loads)
    if k < 2 or total == 0 or max(loads) * k - total <= REFINE_TOLERANCE * total:
        return parts, loads
    loads = list(loads)
    members = [sorted(part, key=w.__getitem__) for part in parts]
    weights = [list(map(w.__getitem__, part)) for part in members]
    # An exchange that lands both parts within half the tolerance of their midpoint is as good as perfect.
    slack = REFINE_TOLERANCE * total / k / 2
    for _ in range(MAX_ROUNDS_PER_PART * k):
        top = max(loads)
        if top * k - total <= REFINE_TOLERANCE * total:
            break
        h = loads.index(top)
        exchanged = False
        for p in _partners(loads):
            gap = top - loads[p]
            if gap <= 0:
                break
            xi, yi, gain = _best_exchange(weights[h], weights[p], gap, allow_moves, slack)
            if gain <= 0:
                continue
            x, ix = weights[h].pop(xi), members[h].pop(xi)
            y = 0
            if yi >= 0:
                y, iy = weights[p].pop(yi), members[p].pop(yi)
                at = bisect_right(weights[h], y)
                weights[h].insert(at, y)
                members[h].insert(at, iy)
            at = bisect_right(weights[p], x)
            weights[p].insert(at, x)
            members[p].insert(at, ix)
            loads[h] -= x - y
            loads[p] += x - y
            exchanged = True
            break
        if not exchanged:
            break
    return members, loads
