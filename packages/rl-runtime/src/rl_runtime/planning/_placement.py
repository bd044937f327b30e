"""A placement: which sub-graph each worker rank runs, on which slot, with which data-parallel rank and size.

All the workers of one sub-graph run the same graph and form its data-parallel group: a worker's
data-parallel rank is its position among them (by rank) and the size is their number, for every node and
role of the sub-graph. A placement is plain, frozen data that pickles, so the driver can hand it to every
worker and each looks up its own part.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rl_core import nearest_name
from rl_core.graph import CrossDependency, NodeRole, TaskGraph
from rl_runtime.planning._config import SchedulerConfig
from rl_runtime.planning._errors import PlanningError


@attrs.frozen
class DataParallelInfo:
    """A worker's rank within its data-parallel group and the group's size."""

    rank: int
    size: int


@attrs.frozen
class SubgraphPlacement:
    """One irreducible sub-graph, the plan graph it came from, its weight and the worker ranks that run it."""

    graph: TaskGraph
    source_graph_id: str
    weight: int
    ranks: tuple[int, ...]

    @property
    def subgraph_id(self) -> str:
        return self.graph.graph_id

    @property
    def roles(self) -> tuple[NodeRole, ...]:
        """The distinct roles of the sub-graph's nodes, in topological order of first appearance."""
        return tuple(dict.fromkeys(self.graph[node_id].role for node_id in self.graph.topological_order))


@attrs.frozen
class WorkerAssignment:
    """What worker `rank` runs: its slot (`node_index`, `local_slot`), its sub-graph and its data-parallel place."""

    rank: int
    node_index: int
    local_slot: int
    subgraph: SubgraphPlacement
    dp: DataParallelInfo

    @property
    def graph(self) -> TaskGraph:
        """The TaskGraph this worker runs."""
        return self.subgraph.graph

    def dp_for_node(self, node_id: str) -> DataParallelInfo:
        """Data-parallel rank and size of this worker for node `node_id` of its graph."""
        if node_id not in self.graph:
            near = nearest_name(str(node_id), list(self.graph.nodes))
            hint = f" (did you mean {near!r}?)" if near else ""
            raise PlanningError(
                f"rank {self.rank} runs sub-graph {self.subgraph.subgraph_id!r}, which has no node {node_id!r}{hint}; "
                f"its nodes: {', '.join(self.graph.topological_order)}"
            )
        return self.dp

    def dp_for_role(self, role: NodeRole) -> DataParallelInfo:
        """Data-parallel rank and size of this worker for the nodes of `role` in its graph."""
        if role not in self.subgraph.roles:
            raise PlanningError(
                f"rank {self.rank} runs sub-graph {self.subgraph.subgraph_id!r}, which has no {role.value!r} node; "
                f"its roles: {', '.join(r.value for r in self.subgraph.roles)}"
            )
        return self.dp


@attrs.frozen
class RoleGroup:
    """The worker ranks that run role `role` of sub-graph `subgraph_id`: one data-parallel process group."""

    subgraph_id: str
    role: NodeRole
    ranks: tuple[int, ...]


@attrs.frozen
class Placement:
    """Every worker rank's sub-graph and slot; built by `TaskScheduler.schedule`, identical on every process."""

    config: SchedulerConfig
    """The scheduler settings that produced it."""
    subgraphs: tuple[SubgraphPlacement, ...]
    """In priority order: heaviest first, then most nodes, then plan order."""
    workers: tuple[WorkerAssignment, ...]
    """Indexed by rank."""
    cross_dependencies: tuple[CrossDependency, ...]
    """Edges between sub-graphs (data that must go through the coordinator)."""

    @property
    def world_size(self) -> int:
        return len(self.workers)

    @property
    def slots_per_node(self) -> int:
        return self.config.slots_per_node

    def worker(self, rank: int) -> WorkerAssignment:
        """The assignment of worker `rank`."""
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(self.workers):
            raise PlanningError(f"rank must be an int in [0, {len(self.workers)}), got {rank!r}")
        return self.workers[rank]

    def subgraph(self, subgraph_id: str) -> SubgraphPlacement:
        """The sub-graph with id `subgraph_id` (e.g. "ppo/1")."""
        for placed in self.subgraphs:
            if placed.subgraph_id == subgraph_id:
                return placed
        ids = [placed.subgraph_id for placed in self.subgraphs]
        near = nearest_name(str(subgraph_id), ids)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise PlanningError(f"no sub-graph {subgraph_id!r}{hint}; the placement has {', '.join(ids)}")

    def owner(self, source_graph_id: str, node_id: str) -> SubgraphPlacement:
        """The sub-graph holding node `node_id` of plan graph `source_graph_id` (e.g. a cross dependency's end)."""
        for placed in self.subgraphs:
            if placed.source_graph_id == source_graph_id and node_id in placed.graph:
                return placed
        raise PlanningError(f"plan graph {source_graph_id!r} has no node {node_id!r} in this placement")

    @property
    def role_groups(self) -> tuple[RoleGroup, ...]:
        """One group per (sub-graph, role), sub-graphs in priority order, roles in topological order."""
        return tuple(
            RoleGroup(placed.subgraph_id, role, placed.ranks) for placed in self.subgraphs for role in placed.roles
        )

    def describe(self) -> str:
        """A plain-text table of the sub-graphs' shares and of every rank's assignment, for the start-up log."""
        config = self.config
        lines = [
            f"placement: {config.num_nodes} node(s) x {config.slots_per_node} slot(s) = {self.world_size} workers; "
            f"strategy {config.strategy}, colocate {_on(config.colocate)}, node cohesion {_on(config.node_cohesion)}, "
            f"load balancing {_on(config.node_load)}",
            *_table(
                ("sub-graph", "from", "weight", "workers", "ranks", "nodes"),
                (
                    (
                        p.subgraph_id,
                        p.source_graph_id,
                        f"{p.weight:,}",
                        str(len(p.ranks)),
                        _spans(p.ranks),
                        self._nodes(p),
                    )
                    for p in self.subgraphs
                ),
            ),
            "",
            *_table(
                ("rank", "node", "slot", "sub-graph", "dp", "roles"),
                (
                    (
                        str(w.rank),
                        str(w.node_index),
                        str(w.local_slot),
                        w.subgraph.subgraph_id,
                        f"{w.dp.rank}/{w.dp.size}",
                        ",".join(role.value for role in w.subgraph.roles),
                    )
                    for w in self.workers
                ),
            ),
        ]
        return "\n".join(lines)

    def _nodes(self, placed: SubgraphPlacement) -> str:
        return ",".join(str(node) for node in dict.fromkeys(rank // self.slots_per_node for rank in placed.ranks))


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _spans(ranks: tuple[int, ...]) -> str:
    """`(0, 1, 2, 5)` -> "0-2,5"."""
    spans: list[str] = []
    start = previous = ranks[0]
    for rank in (*ranks[1:], None):
        if rank is not None and rank == previous + 1:
            previous = rank
            continue
        spans.append(str(start) if start == previous else f"{start}-{previous}")
        if rank is not None:
            start = previous = rank
    return ",".join(spans)


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    rows = [header, *rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
