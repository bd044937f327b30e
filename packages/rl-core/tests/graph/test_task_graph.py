"""TaskGraph: validation at build time, adjacency, order, entries and exits, sub-graphs, immutability."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import UnknownNameError
from rl_core.graph import (
    CycleError,
    DuplicateNodeError,
    GraphError,
    Node,
    NodeRole,
    TaskGraph,
    UnknownDependencyError,
)


def _n(node_id: str, *deps: str) -> Node:
    return Node(node_id, "op", dependencies=deps)


def _diamond() -> TaskGraph:
    # Declared out of order on purpose: d first, though it runs last.
    return TaskGraph("diamond", [_n("d", "b", "c"), _n("a"), _n("c", "a"), _n("b", "a")], "a diamond")


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 8) -> TaskGraph:
    size = draw(st.integers(1, max_nodes))
    rank = draw(st.permutations(range(size)))  # a hidden topological order
    pairs = [(a, b) for a in range(size) for b in range(size) if rank[a] < rank[b]]
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    deps: dict[int, list[str]] = {b: [] for b in range(size)}
    for (a, b), kept in zip(pairs, keep, strict=True):
        if kept:
            deps[b].append(f"n{a}")
    return TaskGraph("g", [_n(f"n{i}", *deps[i]) for i in range(size)])


def test_adjacency_order_entries_exits_by_hand() -> None:
    graph = _diamond()
    assert graph.graph_id == "diamond"
    assert graph.description == "a diamond"
    assert list(graph.nodes) == ["d", "a", "c", "b"]
    assert dict(graph.adjacency) == {"d": (), "a": ("c", "b"), "c": ("d",), "b": ("d",)}
    assert dict(graph.reverse_adjacency) == {"d": ("b", "c"), "a": (), "c": ("a",), "b": ("a",)}
    # Ties (b and c both ready after a) keep declaration order: c was declared before b.
    assert graph.topological_order == ("a", "c", "b", "d")
    assert graph.entry_ids == ("a",)
    assert graph.exit_ids == ("d",)
    assert graph.successors("a") == ("c", "b")
    assert graph.predecessors("d") == ("b", "c")
    assert graph.descendants("a") == {"b", "c", "d"}
    assert graph.ancestors("d") == {"a", "b", "c"}
    assert graph.ancestors("a") == frozenset()
    assert graph["b"].dependencies == ("a",)
    assert "b" in graph and "z" not in graph
    assert len(graph) == 4


def test_subgraph_keeps_only_inner_dependencies() -> None:
    sub = _diamond().subgraph(["b", "d"], "part")
    assert sub.graph_id == "part"
    assert sub.description == "a diamond"
    assert list(sub.nodes) == ["d", "b"]
    assert sub["d"].dependencies == ("b",)
    assert sub["b"].dependencies == ()
    assert _diamond().subgraph(["a"]).graph_id == "diamond"


def test_subgraph_rejections() -> None:
    with pytest.raises(UnknownNameError, match=r"graph 'diamond' has no node 'x'; its nodes: a, c, b, d"):
        _diamond().subgraph(["a", "x"])
    with pytest.raises(GraphError, match="graph 'diamond' has no nodes; add at least one"):
        _diamond().subgraph([])


def test_unknown_node_lookup_names_the_nearest() -> None:
    graph = TaskGraph("g", [_n("rollout_actor"), _n("actor_train", "rollout_actor")])
    with pytest.raises(
        UnknownNameError, match=r"graph 'g' has no node 'rollout_actr' \(did you mean 'rollout_actor'\?\)"
    ):
        graph["rollout_actr"]
    with pytest.raises(UnknownNameError, match="has no node 'x'"):
        graph.successors("x")
    with pytest.raises(UnknownNameError, match="has no node 'x'"):
        graph.predecessors("x")
    with pytest.raises(UnknownNameError, match="has no node 'x'"):
        graph.descendants("x")
    with pytest.raises(UnknownNameError, match="has no node 'x'"):
        graph.ancestors("x")


def test_graph_is_immutable() -> None:
    graph = _diamond()
    with pytest.raises(AttributeError, match="TaskGraph is immutable; cannot set 'graph_id'"):
        graph.graph_id = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="TaskGraph is immutable; cannot set '_nodes'"):
        graph._nodes = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="TaskGraph is immutable; cannot delete '_nodes'"):
        del graph._nodes
    with pytest.raises(TypeError):
        graph.nodes["x"] = _n("x")  # type: ignore[index]


def test_equality_ignores_declaration_order_and_hash_agrees() -> None:
    other = TaskGraph("diamond", [_n("a"), _n("b", "a"), _n("c", "a"), _n("d", "b", "c")], "a diamond")
    assert other == _diamond()
    assert hash(other) == hash(_diamond())
    assert other != TaskGraph("diamond2", other.nodes.values(), "a diamond")
    assert other != TaskGraph("diamond", other.nodes.values(), "other text")
    assert other != "diamond"


def test_pickles_and_deep_copies() -> None:
    graph = _diamond()
    for copied in (pickle.loads(pickle.dumps(graph)), copy.deepcopy(graph), copy.copy(graph)):
        assert copied == graph
        assert list(copied.nodes) == list(graph.nodes)
        assert copied.topological_order == graph.topological_order


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(DuplicateNodeError, match="graph 'g' has two nodes with id 'a'; ids must be unique"):
        TaskGraph("g", [_n("a"), _n("b"), _n("a")])


def test_unknown_dependencies_are_all_named_with_the_nearest() -> None:
    with pytest.raises(
        UnknownDependencyError,
        match=r"graph 'g': node 'train' depends on unknown node 'rolout' \(did you mean 'rollout'\?\); "
        r"node 'log' depends on unknown node 'zzz'$",
    ):
        TaskGraph("g", [_n("rollout"), _n("train", "rolout"), _n("log", "zzz")])


def test_cycle_is_named_in_execution_order() -> None:
    # a runs before b (b depends on a), b before c, c before a.
    nodes = [_n("start"), _n("a", "start", "c"), _n("b", "a"), _n("c", "b"), _n("after", "c")]
    with pytest.raises(CycleError, match=r"graph 'g' has a dependency cycle: a -> b -> c -> a \(each runs") as info:
        TaskGraph("g", nodes)
    assert info.value.cycle == ("a", "b", "c", "a")


def test_two_node_cycle() -> None:
    with pytest.raises(CycleError, match="dependency cycle: x -> y -> x") as info:
        TaskGraph("g", [_n("x", "y"), _n("y", "x")])
    assert info.value.cycle == ("x", "y", "x")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", [_n("a")]), "graph id must be a non-empty str without whitespace, got ''"),
        (("my graph", [_n("a")]), "graph id must be a non-empty str without whitespace, got 'my graph'"),
        (("g", []), "graph 'g' has no nodes; add at least one"),
        (("g", [_n("a"), "b"]), "graph 'g': item 1 is a str, not a Node"),
        (("g", [_n("a")], 3), "graph 'g': description must be a str, got 3"),
    ],
)
def test_other_rejections(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        TaskGraph(*args)  # type: ignore[arg-type]


def test_roles_and_types_are_kept() -> None:
    node = Node("r", "generate", role=NodeRole.ROLLOUT)
    assert TaskGraph("g", [node])["r"] is node


@settings(max_examples=80, deadline=None)
@given(dags())
def test_random_dag_order_entries_exits(graph: TaskGraph) -> None:
    position = {node_id: index for index, node_id in enumerate(graph.topological_order)}
    assert sorted(position) == sorted(graph.nodes)
    for node in graph.nodes.values():
        for dep in node.dependencies:
            assert position[dep] < position[node.id]
            assert node.id in graph.successors(dep)
    assert set(graph.entry_ids) == {n.id for n in graph.nodes.values() if not n.dependencies}
    has_dependent = {dep for n in graph.nodes.values() for dep in n.dependencies}
    assert set(graph.exit_ids) == set(graph.nodes) - has_dependent
    for node_id in graph.nodes:
        # Walk dependencies plainly, one step at a time.
        found: set[str] = set()
        frontier = list(graph[node_id].dependencies)
        while frontier:
            dep = frontier.pop()
            if dep not in found:
                found.add(dep)
                frontier.extend(graph[dep].dependencies)
        assert graph.ancestors(node_id) == found
        assert all(node_id in graph.descendants(a) for a in found)
