"""Splitting a TaskGraph into sub-graphs a planner places on separate worker groups: the one splitter.

`split_graph(graph, rule)` cuts by one of two rules (`SplitRule`), into a partition: every node lands in
exactly one sub-graph, every edge between sub-graphs is reported as a `CrossDependency`, and the
sub-graphs are listed so that every cross dependency points from an earlier one to a later one.

`SplitRule.SHAPE` (the TaskScheduler's, for plans of one or many graphs) follows siiRL's
`discover_and_split_parallel_paths`, applied to one piece at a time until no rule applies to any piece:

1. Disconnected parts: a piece whose nodes fall into several weakly connected components is split
   into them (parallel paths that never meet).
2. Fan-out to distinct exits: at the first node (in topological order) whose children reach pairwise
   disjoint sets of nodes (hence distinct exits), each group of overlapping children's downstream
   nodes becomes a branch, and the rest (the fork and everything upstream or aside) stays the trunk.
3. Re-converging paths: at the first node with two or more parents, the node and everything
   downstream of it become one piece and the parallel paths leading into it another.

Unlike siiRL, which copies the shared upstream (or downstream) nodes into every branch and can drop a
node that feeds a branch from outside the fork's ancestry, this is a partition. A graph is irreducible
exactly when it is a single chain, and an irreducible graph comes back unchanged.

`SplitRule.ROLLOUT` (split placement's, which gives sampling and training slots of their own) cuts by
role rather than by shape, so it also cuts a chain such as GRPO: the rollout sub-graph is every node of a
`ROLLOUT_ROLES` role that depends only on rollout nodes, the training sub-graph is everything else, in
that order. A graph with no rollout or no training part cannot be cut this way (`GraphError`).
"""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from rl_core._errors import UnknownNameError
from rl_core.graph._errors import GraphError
from rl_core.graph._node import NodeRole
from rl_core.graph._task_graph import TaskGraph

SUBGRAPH_ID_SEPARATOR = "/"
"""Sub-graph ids are `<graph id>/<index>` (indices in the order listed), or `<graph id>/rollout` and `/train`."""

ROLLOUT_ROLES = frozenset({NodeRole.ROLLOUT, NodeRole.REWARD, NodeRole.DYNAMIC_SAMPLING})
"""Roles whose nodes `SplitRule.ROLLOUT` keeps on the rollout side: sampling, and the reward that stays with it."""


class SplitRule(Enum):
    """How `split_graph` cuts a graph (see the module docstring)."""

    SHAPE = "shape"
    """Parallel paths, fan-outs and merges, repeatedly, until every piece is a chain: `<id>/0`, `<id>/1`, ..."""
    ROLLOUT = "rollout"
    """By role, into `<id>/rollout` (the leading `ROLLOUT_ROLES` nodes) and `<id>/train` (the rest)."""


@dataclass(frozen=True)
class CrossDependency:
    """Node `downstream_node` of sub-graph `downstream_graph` depends on `upstream_node` of `upstream_graph`."""

    upstream_graph: str
    upstream_node: str
    downstream_graph: str
    downstream_node: str


@dataclass(frozen=True)
class SplitResult:
    """The sub-graphs `split_graph` cut `source` into (in order) and the dependencies that cross between them."""

    source: TaskGraph
    subgraphs: tuple[TaskGraph, ...]
    cross_dependencies: tuple[CrossDependency, ...]

    @property
    def is_split(self) -> bool:
        """Whether the source was split at all (False: `subgraphs` is just the source)."""
        return len(self.subgraphs) > 1

    def owner(self, node_id: str) -> str:
        """Id of the sub-graph holding `node_id`."""
        for graph in self.subgraphs:
            if node_id in graph:
                return graph.graph_id
        raise UnknownNameError(f"node {node_id!r} is not in graph {self.source.graph_id!r}")


def split_graph(graph: TaskGraph, rule: SplitRule = SplitRule.SHAPE) -> SplitResult:
    """Split `graph` by `rule`: the shape rules until every sub-graph is a chain, or the rollout/training cut.

    Raises `GraphError` when `rule` is `SplitRule.ROLLOUT` and `graph` has no rollout or no training part.
    """
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"split_graph takes a TaskGraph, got {type(graph).__name__}")
    if not isinstance(rule, SplitRule):
        raise TypeError(f"split_graph's rule is a SplitRule (e.g. SplitRule.ROLLOUT), got {rule!r}")
    if rule is SplitRule.ROLLOUT:
        rollout, train = _rollout_parts(graph)
        return _result(graph, [(rollout, "rollout"), (train, "train")])
    pending = [frozenset(graph.nodes)]
    final: list[frozenset[str]] = []
    while pending:
        part = pending.pop()
        pieces = _split_once(graph, part)
        if pieces is None:
            final.append(part)
        else:
            pending.extend(pieces)
    if len(final) == 1:
        return SplitResult(graph, (graph,), ())
    return _result(graph, [(part, str(index)) for index, part in enumerate(_order_parts(graph, final))])


def _result(graph: TaskGraph, parts: Sequence[tuple[Iterable[str], str]]) -> SplitResult:
    """The sub-graphs of `parts` ((node ids, id suffix), in order) and every edge that crosses between them."""
    subgraphs = tuple(
        graph.subgraph(part, f"{graph.graph_id}{SUBGRAPH_ID_SEPARATOR}{suffix}") for part, suffix in parts
    )
    owner = {node_id: sub.graph_id for sub in subgraphs for node_id in sub.nodes}
    cross = tuple(
        CrossDependency(owner[dep], dep, owner[node_id], node_id)
        for node_id in graph.topological_order
        for dep in graph.predecessors(node_id)
        if owner[dep] != owner[node_id]
    )
    return SplitResult(graph, subgraphs, cross)


def _rollout_parts(graph: TaskGraph) -> tuple[list[str], list[str]]:
    """The rollout node ids (`ROLLOUT_ROLES`, depending only on rollout nodes) and the rest, in topological order."""
    rollout: list[str] = []
    for node_id in graph.topological_order:
        node = graph[node_id]
        if node.role in ROLLOUT_ROLES and all(dep in rollout for dep in node.dependencies):
            rollout.append(node_id)
    train = [node_id for node_id in graph.topological_order if node_id not in rollout]
    if not rollout or not train:
        empty = "rollout" if not rollout else "training"
        raise GraphError(
            f"pipeline {graph.graph_id!r} has no {empty} part to give slots of its own "
            f"(rollout roles: {', '.join(sorted(r.value for r in ROLLOUT_ROLES))}, starting the pipeline)"
        )
    return rollout, train


def is_irreducible(graph: TaskGraph) -> bool:
    """Whether no shape rule applies to `graph` (equivalently: it is a single chain)."""
    return _split_once(graph, frozenset(graph.nodes)) is None


def _split_once(graph: TaskGraph, part: frozenset[str]) -> list[frozenset[str]] | None:
    """The pieces the first applicable rule cuts `part` into, or None when `part` is irreducible."""
    components = _components(graph, part)
    if len(components) > 1:
        return components
    order = [node_id for node_id in graph.topological_order if node_id in part]
    for fork in order:
        branches = _disjoint_branches(graph, fork, part)
        if len(branches) > 1:
            trunk = part.difference(*branches)
            return [trunk, *branches]
    for merge in order:
        if sum(parent in part for parent in graph.predecessors(merge)) > 1:
            downstream = _downstream(graph, merge, part)
            return [part - downstream, downstream]
    return None


def _components(graph: TaskGraph, part: frozenset[str]) -> list[frozenset[str]]:
    unseen = set(part)
    components: list[frozenset[str]] = []
    while unseen:
        stack = [unseen.pop()]
        component = set(stack)
        while stack:
            node_id = stack.pop()
            for other in (*graph.successors(node_id), *graph.predecessors(node_id)):
                if other in unseen:
                    unseen.remove(other)
                    component.add(other)
                    stack.append(other)
        components.append(frozenset(component))
    return components


def _downstream(graph: TaskGraph, start: str, part: frozenset[str]) -> frozenset[str]:
    """`start` and every node of `part` reachable from it through nodes of `part`."""
    found = {start}
    stack = [start]
    while stack:
        for child in graph.successors(stack.pop()):
            if child in part and child not in found:
                found.add(child)
                stack.append(child)
    return frozenset(found)


def _disjoint_branches(graph: TaskGraph, fork: str, part: frozenset[str]) -> list[frozenset[str]]:
    """The downstream sets of `fork`'s children within `part`, merged where they overlap."""
    groups: list[frozenset[str]] = []
    for child in graph.successors(fork):
        if child not in part:
            continue
        merged = _downstream(graph, child, part)
        keep: list[frozenset[str]] = []
        for group in groups:
            if group.isdisjoint(merged):
                keep.append(group)
            else:
                merged = merged | group
        groups = [*keep, merged]
    return groups


def _order_parts(graph: TaskGraph, parts: Iterable[frozenset[str]]) -> list[frozenset[str]]:
    """`parts` in an order where every edge between two parts goes forward; ties by earliest node."""
    rank = {node_id: index for index, node_id in enumerate(graph.topological_order)}
    parts = sorted(parts, key=lambda part: min(rank[node_id] for node_id in part))
    index_of = {node_id: index for index, part in enumerate(parts) for node_id in part}
    later: list[set[int]] = [set() for _ in parts]
    for node_id in graph.topological_order:
        for dep in graph.predecessors(node_id):
            if index_of[dep] != index_of[node_id]:
                later[index_of[dep]].add(index_of[node_id])
    waiting = [0] * len(parts)
    for targets in later:
        for target in targets:
            waiting[target] += 1
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    ordered: list[frozenset[str]] = []
    while ready:
        index = heapq.heappop(ready)
        ordered.append(parts[index])
        for target in later[index]:
            waiting[target] -= 1
            if waiting[target] == 0:
                heapq.heappush(ready, target)
    return ordered
