"""An immutable, validated DAG of nodes: adjacency, topological order, entries, exits and sub-graphs."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, NoReturn

from rl_core._errors import UnknownNameError
from rl_core._registry import nearest_name
from rl_core.graph._errors import CycleError, DuplicateNodeError, GraphError, UnknownDependencyError
from rl_core.graph._node import Node, check_identifier
from rl_core.graph._serialize import graph_to_dict, parse_graph_dict


class TaskGraph:
    """A directed acyclic graph of `Node`s, validated when built and immutable afterwards.

    Building one raises `DuplicateNodeError` for a repeated id, `UnknownDependencyError` for a dependency
    that is not a node of the graph, `CycleError` naming the cycle, and `GraphError` for an empty graph.
    Node ids are listed in topological order (ties broken by declaration order) wherever order matters.
    """

    __slots__ = ("_description", "_graph_id", "_nodes", "_order", "_predecessors", "_successors")
    _description: str
    _graph_id: str
    _nodes: Mapping[str, Node]
    _order: tuple[str, ...]
    _predecessors: Mapping[str, tuple[str, ...]]
    _successors: Mapping[str, tuple[str, ...]]

    def __init__(self, graph_id: str, nodes: Iterable[Node], description: str = "") -> None:
        check_identifier(graph_id, "graph id")
        if not isinstance(description, str):
            raise GraphError(f"graph {graph_id!r}: description must be a str, got {description!r}")
        by_id: dict[str, Node] = {}
        for position, node in enumerate(nodes):
            if not isinstance(node, Node):
                raise GraphError(f"graph {graph_id!r}: item {position} is a {type(node).__name__}, not a Node")
            if node.id in by_id:
                raise DuplicateNodeError(f"graph {graph_id!r} has two nodes with id {node.id!r}; ids must be unique")
            by_id[node.id] = node
        if not by_id:
            raise GraphError(f"graph {graph_id!r} has no nodes; add at least one")
        _check_dependencies_exist(graph_id, by_id)
        successors: dict[str, list[str]] = {node_id: [] for node_id in by_id}
        for node in by_id.values():
            for dep in node.dependencies:
                successors[dep].append(node.id)
        set_attr = object.__setattr__
        set_attr(self, "_graph_id", graph_id)
        set_attr(self, "_description", description)
        set_attr(self, "_nodes", MappingProxyType(by_id))
        set_attr(self, "_successors", MappingProxyType({k: tuple(v) for k, v in successors.items()}))
        set_attr(self, "_predecessors", MappingProxyType({k: n.dependencies for k, n in by_id.items()}))
        set_attr(self, "_order", _topological_order(graph_id, by_id, successors))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskGraph:
        """Build a graph from the dict form that `to_dict` writes (e.g. loaded from YAML); see `Pipeline.from_dict`."""
        graph_id, description, nodes = parse_graph_dict(data)
        return cls(graph_id, nodes, description)

    def to_dict(self) -> dict[str, Any]:
        """The graph as plain dicts, lists and scalars (YAML/JSON ready); `from_dict` reads it back."""
        return graph_to_dict(self)

    @property
    def graph_id(self) -> str:
        return self._graph_id

    @property
    def description(self) -> str:
        return self._description

    @property
    def nodes(self) -> Mapping[str, Node]:
        """Read-only mapping from node id to node, in declaration order."""
        return self._nodes

    @property
    def adjacency(self) -> Mapping[str, tuple[str, ...]]:
        """Read-only mapping from node id to the ids of the nodes that depend on it."""
        return self._successors

    @property
    def reverse_adjacency(self) -> Mapping[str, tuple[str, ...]]:
        """Read-only mapping from node id to the ids it depends on."""
        return self._predecessors

    @property
    def topological_order(self) -> tuple[str, ...]:
        """Every node id, each after all its dependencies; ties keep declaration order."""
        return self._order

    @property
    def entry_ids(self) -> tuple[str, ...]:
        """Ids of the nodes with no dependencies, in topological order."""
        return tuple(node_id for node_id in self._order if not self._predecessors[node_id])

    @property
    def exit_ids(self) -> tuple[str, ...]:
        """Ids of the nodes nothing depends on, in topological order."""
        return tuple(node_id for node_id in self._order if not self._successors[node_id])

    def __getitem__(self, node_id: str) -> Node:
        self._require(node_id)
        return self._nodes[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def successors(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes that depend directly on `node_id`."""
        self._require(node_id)
        return self._successors[node_id]

    def predecessors(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes `node_id` depends on directly."""
        self._require(node_id)
        return self._predecessors[node_id]

    def descendants(self, node_id: str) -> frozenset[str]:
        """Ids of every node that transitively depends on `node_id` (not including it)."""
        self._require(node_id)
        return _reach(node_id, self._successors)

    def ancestors(self, node_id: str) -> frozenset[str]:
        """Ids of every node `node_id` transitively depends on (not including it)."""
        self._require(node_id)
        return _reach(node_id, self._predecessors)

    def subgraph(self, node_ids: Iterable[str], graph_id: str | None = None) -> TaskGraph:
        """The graph induced by `node_ids`: those nodes, keeping only the dependencies among them.

        The result is named `graph_id` (default: this graph's id) and keeps declaration order.
        """
        wanted: set[str] = set()
        for node_id in node_ids:
            self._require(node_id)
            wanted.add(node_id)
        nodes: list[Node] = []
        for node in self._nodes.values():
            if node.id in wanted:
                kept = tuple(dep for dep in node.dependencies if dep in wanted)
                nodes.append(node if kept == node.dependencies else replace(node, dependencies=kept))
        return TaskGraph(self._graph_id if graph_id is None else graph_id, nodes, self._description)

    def _require(self, node_id: str) -> None:
        if node_id not in self._nodes:
            near = nearest_name(str(node_id), list(self._nodes))
            hint = f" (did you mean {near!r}?)" if near else ""
            raise UnknownNameError(
                f"graph {self._graph_id!r} has no node {node_id!r}{hint}; its nodes: {', '.join(self._order)}"
            )

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"TaskGraph is immutable; cannot set {name!r} (build a new graph instead)")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"TaskGraph is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[type[TaskGraph], tuple[object, ...]]:
        # Slots behind a read-only __setattr__ and mapping proxies defeat default pickling; rebuild instead.
        return (TaskGraph, (self._graph_id, tuple(self._nodes.values()), self._description))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskGraph):
            return NotImplemented
        return (self._graph_id, self._description, dict(self._nodes)) == (
            other._graph_id,
            other._description,
            dict(other._nodes),
        )

    def __hash__(self) -> int:
        return hash((self._graph_id, frozenset(self._nodes.values())))

    def __repr__(self) -> str:
        return f"TaskGraph({self._graph_id!r}, nodes={list(self._order)})"


def _check_dependencies_exist(graph_id: str, by_id: Mapping[str, Node]) -> None:
    problems: list[str] = []
    for node in by_id.values():
        for dep in node.dependencies:
            if dep not in by_id:
                near = nearest_name(dep, list(by_id))
                hint = f" (did you mean {near!r}?)" if near else ""
                problems.append(f"node {node.id!r} depends on unknown node {dep!r}{hint}")
    if problems:
        raise UnknownDependencyError(f"graph {graph_id!r}: " + "; ".join(problems))


def _topological_order(
    graph_id: str, by_id: Mapping[str, Node], successors: Mapping[str, list[str]]
) -> tuple[str, ...]:
    """Kahn's algorithm with ties broken by declaration order; raises `CycleError` naming a cycle."""
    position = {node_id: index for index, node_id in enumerate(by_id)}
    waiting = {node_id: len(node.dependencies) for node_id, node in by_id.items()}
    ready = [position[node_id] for node_id, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    names = list(by_id)
    order: list[str] = []
    while ready:
        node_id = names[heapq.heappop(ready)]
        order.append(node_id)
        for child in successors[node_id]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, position[child])
    if len(order) < len(by_id):
        _raise_cycle(graph_id, by_id, {node_id for node_id, count in waiting.items() if count > 0})
    return tuple(order)


def _raise_cycle(graph_id: str, by_id: Mapping[str, Node], stuck: set[str]) -> NoReturn:
    # Every node Kahn could not order waits on another such node, so walking dependencies must repeat.
    start = next(node_id for node_id in by_id if node_id in stuck)
    walk = [start]
    seen = {start: 0}
    while True:
        dep = next(d for d in by_id[walk[-1]].dependencies if d in stuck)
        if dep in seen:
            cycle = (*walk[seen[dep] :], dep)[::-1]
            break
        seen[dep] = len(walk)
        walk.append(dep)
    raise CycleError(
        f"graph {graph_id!r} has a dependency cycle: {' -> '.join(cycle)} (each runs before the next); "
        "remove one of these dependencies",
        cycle,
    )


def _reach(start: str, edges: Mapping[str, tuple[str, ...]]) -> frozenset[str]:
    found: set[str] = set()
    stack = list(edges[start])
    while stack:
        node_id = stack.pop()
        if node_id not in found:
            found.add(node_id)
            stack.extend(edges[node_id])
    return frozenset(found)
