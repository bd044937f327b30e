"""Swap refinement: a hand-worked exchange, a move, and never a worse maximum."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.balancing._refine import refine_by_swaps


def test_exchange_closes_the_gap() -> None:
    w = [6, 3, 4, 1]
    # {6, 3} = 9 vs {4, 1} = 5: gap 4, exchanging 6 for 4 moves 2 -> 7 and 7.
    parts, loads = refine_by_swaps(w, [[0, 1], [2, 3]], [9, 5], allow_moves=False)
    assert sorted(sorted(p) for p in parts) == [[0, 3], [1, 2]]
    assert loads == [7, 7]


def test_move_only_when_allowed() -> None:
    w = [2, 2, 2, 2]
    # {2, 2, 2} = 6 vs {2} = 2: every exchange moves 0; moving one 2 gives 4 / 4.
    kept, kept_loads = refine_by_swaps(w, [[0, 1, 2], [3]], [6, 2], allow_moves=False)
    assert kept_loads == [6, 2]
    assert [len(p) for p in kept] == [3, 1]
    moved, moved_loads = refine_by_swaps(w, [[0, 1, 2], [3]], [6, 2], allow_moves=True)
    assert moved_loads == [4, 4]
    assert [len(p) for p in moved] == [2, 2]


def test_balanced_input_is_returned_unchanged() -> None:
    parts, loads = refine_by_swaps([1, 1], [[0], [1]], [1, 1], allow_moves=True)
    assert parts == [[0], [1]]
    assert loads == [1, 1]


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(st.integers(0, 1000), min_size=6, max_size=40),
    k=st.integers(2, 6),
    allow_moves=st.booleans(),
)
def test_never_raises_the_maximum_and_keeps_items(values: list[int], k: int, allow_moves: bool) -> None:
    n = len(values) - len(values) % k
    parts = [list(range(p, n, k)) for p in range(k)]
    loads = [sum(values[i] for i in part) for part in parts]
    new_parts, new_loads = refine_by_swaps(values, parts, loads, allow_moves=allow_moves)
    assert max(new_loads) <= max(loads)
    assert sorted(i for part in new_parts for i in part) == list(range(n))
    assert new_loads == [sum(values[i] for i in part) for part in new_parts]
    assert all(new_parts)
    if not allow_moves:
        assert [len(p) for p in new_parts] == [len(p) for p in parts]
