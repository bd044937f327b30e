"""Which edges a worker serves locally and which go through the coordinator, decided once from the placement.

An edge is local when its two nodes have the same data-parallel layout, i.e. run on the same worker ranks
(`rl_coordinator.coordinator.use_local_path`; rank r feeds rank r). That is every edge inside a sub-graph.
Edges between sub-graphs (the placement's cross dependencies) go through the DataCoordinator, keyed
`"<src>-><dst>"` and by step; the consumer asks for the whole step's samples of the edge (`batch_size`),
split contiguously over its ranks.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from rl_coordinator.coordinator import use_local_path
from rl_runtime.planning import Placement
from rl_runtime.workers._errors import RoutingError

EDGE_SEPARATOR = "->"


def edge_key(src: str, dst: str) -> str:
    """The key of the edge from node `src` to node `dst`: `"<src>-><dst>"`."""
    return f"{src}{EDGE_SEPARATOR}{dst}"


@attrs.frozen
class EdgeRoute:
    """One edge as a worker sees it: its key, its ends, whether it stays local, and its coordinator settings."""

    key: str
    src: str
    dst: str
    local: bool
    producer_dp_size: int
    consumer_dp_size: int
    batch_size: int | None = None
    """Samples the consumer side reads per step over all its ranks; None for a local edge."""


@attrs.frozen
class WorkerRoutes:
    """The edges into and out of each node a worker runs."""

    inputs: Mapping[str, tuple[EdgeRoute, ...]]
    outputs: Mapping[str, tuple[EdgeRoute, ...]]

    @property
    def uses_coordinator(self) -> bool:
        """Whether any edge of this worker goes through the coordinator."""
        return any(not route.local for routes in (*self.inputs.values(), *self.outputs.values()) for route in routes)


def plan_routes(placement: Placement, rank: int, edge_batch_sizes: int | Mapping[str, int] = 0) -> WorkerRoutes:
    """The routes of worker `rank`.

    `edge_batch_sizes` gives, per coordinator edge key (or one int for all), the samples a step puts on that edge
    over all producer ranks; RoutingError names a coordinator edge it leaves out.
    """
    assignment = placement.worker(rank)
    graph = assignment.graph
    own = assignment.subgraph.subgraph_id
    inputs: dict[str, list[EdgeRoute]] = {node_id: [] for node_id in graph.topological_order}
    outputs: dict[str, list[EdgeRoute]] = {node_id: [] for node_id in graph.topological_order}
    size = len(assignment.subgraph.ranks)
    for node_id in graph.topological_order:
        for src in graph.predecessors(node_id):
            local = use_local_path(size, size, balance=False)
            route = EdgeRoute(edge_key(src, node_id), src, node_id, local, size, size)
            inputs[node_id].append(route)
            outputs[src].append(route)
    for dep in placement.cross_dependencies:
        if own not in (dep.upstream_graph, dep.downstream_graph):
            continue
        producer = placement.subgraph(dep.upstream_graph)
        consumer = placement.subgraph(dep.downstream_graph)
        key = edge_key(dep.upstream_node, dep.downstream_node)
        local = producer.ranks == consumer.ranks and use_local_path(
            len(producer.ranks), len(consumer.ranks), balance=False
        )
        route = EdgeRoute(
            key,
            dep.upstream_node,
            dep.downstream_node,
            local,
            len(producer.ranks),
            len(consumer.ranks),
            None if local else _batch_size(key, edge_batch_sizes, len(consumer.ranks)),
        )
        if dep.upstream_graph == own:
            outputs[dep.upstream_node].append(route)
        else:
            inputs[dep.downstream_node].append(route)
    return WorkerRoutes(
        {node_id: tuple(routes) for node_id, routes in inputs.items()},
        {node_id: tuple(routes) for node_id, routes in outputs.items()},
    )


def _batch_size(key: str, sizes: int | Mapping[str, int], consumer_dp_size: int) -> int:
    value = sizes if isinstance(sizes, int) else sizes.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RoutingError(
            f"edge {key!r} goes through the coordinator and needs its samples per step (edge_batch_sizes[{key!r}]), "
            f"got {value!r}; pass an int >= 1, a multiple of the consumer's {consumer_dp_size} rank(s)"
        )
    if value % consumer_dp_size:
        raise RoutingError(
            f"edge {key!r}: {value} samples per step cannot be split over the consumer's {consumer_dp_size} ranks; "
            f"pass a multiple of {consumer_dp_size}"
        )
    return value
