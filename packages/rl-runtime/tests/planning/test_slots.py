"""Placing shares on concrete slots: cohesion and load balancing by hand, properties, rejections."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_runtime.planning import PlanningError
from rl_runtime.planning._slots import assign_slots


@pytest.mark.parametrize(
    ("shares", "weights", "cohesion", "balance", "expected"),
    [
        # Cohesive and balanced on 2 nodes x 4: A on node 0; B on the node without load (1); C on node 1, whose
        # load 3 is below node 0's 4; D where there is room (node 0).
        ((2, 2, 2, 2), (4, 3, 2, 1), True, True, ((0, 1), (4, 5), (6, 7), (2, 3))),
        # Cohesive, not balanced: first fit, low ranks first.
        ((2, 2, 2, 2), (4, 3, 2, 1), True, False, ((0, 1), (2, 3), (4, 5), (6, 7))),
        # 3 + 3 + 2 on 4 + 4: C fits on no node and spans both, taking node 0's last slot first.
        ((3, 3, 2), (3, 2, 1), True, False, ((0, 1, 2), (4, 5, 6), (3, 7))),
        # A share larger than a node takes a whole node, then the rest on the next.
        ((6, 2), (1, 1), True, True, ((0, 1, 2, 3, 4, 5), (6, 7))),
        # Not cohesive, balanced: one slot at a time on the least-loaded node, so A alternates nodes.
        ((4, 2, 1, 1), (7000, 3000, 1000, 0), False, True, ((0, 1, 4, 5), (2, 6), (3,), (7,))),
        # Not cohesive, not balanced: plain rank order.
        ((4, 2, 1, 1), (7000, 3000, 1000, 0), False, False, ((0, 1, 2, 3), (4, 5), (6,), (7,))),
    ],
)
def test_by_hand_on_two_nodes_of_four(
    shares: tuple[int, ...], weights: tuple[int, ...], cohesion: bool, balance: bool, expected: tuple
) -> None:
    assert assign_slots(shares, weights, 2, 4, node_cohesion=cohesion, node_load=balance) == expected


def test_zero_weights_balance_by_slot_count() -> None:
    # With no weight to balance, the used-slot count decides: one slot at a time alternates nodes.
    assert assign_slots((2, 2), (0, 0), 2, 2, node_cohesion=False, node_load=True) == ((0, 2), (1, 3))


@pytest.mark.parametrize(
    ("shares", "weights", "match"),
    [
        ((1, 1), (1,), r"got 2 shares for 1 weights"),
        ((5, 4), (1, 1), r"shares \(5, 4\) do not fit 2 nodes x 4 slots"),
        ((0, 2), (1, 1), r"shares \(0, 2\) do not fit 2 nodes x 4 slots with at least one each"),
    ],
)
def test_rejections(shares: tuple[int, ...], weights: tuple[int, ...], match: str) -> None:
    with pytest.raises(PlanningError, match=match):
        assign_slots(shares, weights, 2, 4, node_cohesion=True, node_load=True)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[int], list[int], int, int]:
    num_nodes = draw(st.integers(1, 4))
    per_node = draw(st.integers(1, 6))
    count = draw(st.integers(1, num_nodes * per_node))
    # Split all slots into `count` shares >= 1 (cut points between 1 and total - 1).
    total = num_nodes * per_node
    cuts = sorted(draw(st.sets(st.integers(1, total - 1), min_size=count - 1, max_size=count - 1))) if count > 1 else []
    shares = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    weights = draw(st.lists(st.integers(0, 10**9), min_size=count, max_size=count))
    return shares, weights, num_nodes, per_node


@given(layouts(), st.booleans(), st.booleans())
def test_every_slot_is_used_once_and_shares_are_kept(
    layout: tuple[list[int], list[int], int, int], cohesion: bool, balance: bool
) -> None:
    shares, weights, num_nodes, per_node = layout
    placed = assign_slots(shares, weights, num_nodes, per_node, node_cohesion=cohesion, node_load=balance)
    assert [len(ranks) for ranks in placed] == shares
    assert sorted(rank for ranks in placed for rank in ranks) == list(range(num_nodes * per_node))
    assert all(list(ranks) == sorted(ranks) for ranks in placed)


@given(layouts(), st.booleans())
def test_cohesion_keeps_the_first_sub_graph_on_the_fewest_nodes(
    layout: tuple[list[int], list[int], int, int], balance: bool
) -> None:
    shares, weights, num_nodes, per_node = layout
    first = assign_slots(shares, weights, num_nodes, per_node, node_cohesion=True, node_load=balance)[0]
    assert len({rank // per_node for rank in first}) == -(-shares[0] // per_node)  # ceil(share / per_node)
