"""Graph splitting: hand-worked examples and properties on random DAGs.

Splitting is a partition (each node in exactly one sub-graph, none shared); edges between sub-graphs
come back as cross dependencies.
"""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import UnknownNameError
from rl_core.graph import (
    CrossDependency,
    Node,
    NodeRole,
    TaskGraph,
    is_irreducible,
    split_graph,
)


def _graph(graph_id: str, nodes: list[str], edges: list[tuple[str, str]]) -> TaskGraph:
    """Nodes in declaration order; an edge (a, b) means b depends on a."""
    return TaskGraph(graph_id, [Node(n, f"op_{n}", dependencies=[a for a, b in edges if b == n]) for n in nodes])


def _parts(graph: TaskGraph) -> list[set[str]]:
    return [set(sub.nodes) for sub in split_graph(graph).subgraphs]


def test_reconverging_paths_split_into_feeders_and_shared_tail() -> None:
    # siiRL's example 1: two chains meet at C, which leads on to D and E.
    graph = _graph(
        "ex1",
        ["A", "B", "A1", "B1", "C", "D", "E"],
        [("A", "B"), ("A1", "B1"), ("B", "C"), ("B1", "C"), ("C", "D"), ("D", "E")],
    )
    result = split_graph(graph)
    assert [sub.graph_id for sub in result.subgraphs] == ["ex1/0", "ex1/1", "ex1/2"]
    assert _parts(graph) == [{"A", "B"}, {"A1", "B1"}, {"C", "D", "E"}]
    assert result.cross_dependencies == (
        CrossDependency("ex1/0", "B", "ex1/2", "C"),
        CrossDependency("ex1/1", "B1", "ex1/2", "C"),
    )
    assert result.subgraphs[2]["C"].dependencies == ()
    assert result.owner("D") == "ex1/2"
    assert result.is_split
    assert pickle.loads(pickle.dumps(result)) == result


def test_fan_out_then_reconvergence() -> None:
    # siiRL's example 2: merges at M1 and Z, then Z fans out to two distinct exits K1 and K2.
    edges = [("X", "P1"), ("Y", "P2"), ("P1", "M1"), ("P2", "M1"), ("M1", "Z"), ("P3", "Z")]
    edges += [("Z", "J1"), ("Z", "J2"), ("J1", "K1"), ("J2", "K2")]
    graph = _graph("ex2", ["X", "Y", "P1", "P2", "M1", "P3", "Z", "J1", "J2", "K1", "K2"], edges)
    # P3 is listed before {M1, Z}, which depends on it, though M1 comes first in topological order.
    assert _parts(graph) == [{"X", "P1"}, {"Y", "P2"}, {"P3"}, {"M1", "Z"}, {"J1", "K1"}, {"J2", "K2"}]
    assert {(c.upstream_node, c.downstream_node) for c in split_graph(graph).cross_dependencies} == {
        ("P1", "M1"),
        ("P2", "M1"),
        ("P3", "Z"),
        ("Z", "J1"),
        ("Z", "J2"),
    }


def test_diamond_splits_to_single_nodes() -> None:
    graph = _graph("d", ["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert _parts(graph) == [{"a"}, {"b"}, {"c"}, {"d"}]


def test_shared_reward_for_two_agents() -> None:
    # Two rollouts share one reward node; each agent then has its own advantage and update.
    nodes = ["roll_0", "roll_1", "reward", "adv_0", "train_0", "adv_1", "train_1"]
    edges = [("roll_0", "reward"), ("roll_1", "reward"), ("reward", "adv_0"), ("adv_0", "train_0")]
    edges += [("reward", "adv_1"), ("adv_1", "train_1")]
    assert _parts(_graph("ma", nodes, edges)) == [
        {"roll_0"},
        {"roll_1"},
        {"reward"},
        {"adv_0", "train_0"},
        {"adv_1", "train_1"},
    ]


def test_disconnected_chains_split_apart() -> None:
    graph = _graph("two", ["a", "b", "x", "y"], [("a", "b"), ("x", "y")])
    result = split_graph(graph)
    assert _parts(graph) == [{"a", "b"}, {"x", "y"}]
    assert result.cross_dependencies == ()


def test_chain_is_returned_unchanged() -> None:
    graph = TaskGraph(
        "chain",
        [
            Node("t", "train", role=NodeRole.ACTOR, dependencies=["r"], params={"param_count": 3}),
            Node("r", "generate", role=NodeRole.ROLLOUT),
        ],
    )
    result = split_graph(graph)
    assert result.subgraphs[0] is graph
    assert result.source is graph
    assert result.cross_dependencies == ()
    assert not result.is_split
    assert is_irreducible(graph)


def test_owner_of_unknown_node() -> None:
    with pytest.raises(UnknownNameError, match="node 'zz' is not in graph 'chain'"):
        split_graph(_graph("chain", ["a"], [])).owner("zz")


def test_rejects_non_graph() -> None:
    with pytest.raises(TypeError, match="split_graph takes a TaskGraph, got list"):
        split_graph([])  # type: ignore[arg-type]


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 9) -> TaskGraph:
    size = draw(st.integers(1, max_nodes))
    rank = draw(st.permutations(range(size)))  # a hidden topological order; declaration order differs
    pairs = [(a, b) for a in range(size) for b in range(size) if rank[a] < rank[b]]
    density = draw(st.integers(1, 4))
    draws = draw(st.lists(st.integers(0, 5), min_size=len(pairs), max_size=len(pairs)))
    edges = [(f"n{a}", f"n{b}") for (a, b), value in zip(pairs, draws, strict=True) if value < density]
    return _graph("g", [f"n{i}" for i in range(size)], edges)


@st.composite
def chains(draw: st.DrawFn) -> TaskGraph:
    order = draw(st.permutations([f"n{i}" for i in range(draw(st.integers(1, 8)))]))
    declared = draw(st.permutations(order))
    return _graph("chain", list(declared), list(itertools.pairwise(order)))


def _is_chain(graph: TaskGraph) -> bool:
    """Plainly: connected, every node has at most one dependency and one dependent."""
    edges = [(dep, n.id) for n in graph.nodes.values() for dep in n.dependencies]
    outs = [a for a, _ in edges]
    ins = [b for _, b in edges]
    single = all(outs.count(n) <= 1 and ins.count(n) <= 1 for n in graph.nodes)
    # An acyclic graph with n nodes, n - 1 edges and those degrees is one path.
    return single and len(edges) == len(graph.nodes) - 1


@settings(max_examples=100, deadline=None)
@given(dags())
def test_split_properties(graph: TaskGraph) -> None:
    result = split_graph(graph)
    subs = result.subgraphs
    # Every node lands in exactly one sub-graph, unchanged but for dependencies that left it.
    placed = [node_id for sub in subs for node_id in sub.nodes]
    assert sorted(placed) == sorted(graph.nodes)
    assert len({sub.graph_id for sub in subs}) == len(subs)
    index = {node_id: i for i, sub in enumerate(subs) for node_id in sub.nodes}
    for sub in subs:
        for node in sub.nodes.values():
            original = graph[node.id]
            assert (node.role, node.operation, node.params) == (
                original.role,
                original.operation,
                original.params,
            )
    # Every edge is inside one sub-graph or reported, and nothing else is reported.
    expected_cross = set()
    for node in graph.nodes.values():
        for dep in node.dependencies:
            if index[dep] == index[node.id]:
                assert dep in subs[index[node.id]][node.id].dependencies
            else:
                expected_cross.add(
                    CrossDependency(subs[index[dep]].graph_id, dep, subs[index[node.id]].graph_id, node.id)
                )
    assert set(result.cross_dependencies) == expected_cross
    assert len(result.cross_dependencies) == len(expected_cross)
    for sub in subs:
        # Acyclic and irreducible: each sub-graph is one chain, and splitting it again changes nothing.
        position = {node_id: i for i, node_id in enumerate(sub.topological_order)}
        assert all(position[d] < position[n.id] for n in sub.nodes.values() for d in n.dependencies)
        assert _is_chain(sub)
        again = split_graph(sub)
        assert again.subgraphs == (sub,) and again.cross_dependencies == ()
    # Cross dependencies point forward in the listed order, so sub-graphs can run in that order.
    ids = [sub.graph_id for sub in subs]
    assert all(ids.index(c.upstream_graph) < ids.index(c.downstream_graph) for c in result.cross_dependencies)
    assert is_irreducible(graph) == _is_chain(graph) == (not result.is_split)


@settings(max_examples=60, deadline=None)
@given(chains())
def test_irreducible_graph_is_unchanged(graph: TaskGraph) -> None:
    result = split_graph(graph)
    assert result.subgraphs == (graph,)
    assert result.subgraphs[0] is graph
    assert result.cross_dependencies == ()
