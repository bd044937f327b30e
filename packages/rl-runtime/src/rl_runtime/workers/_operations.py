"""The node-operation registry and what an operation sees: `fn(ctx, inputs) -> StepData`, sync or async.

    @register_operation("compute_reward")
    def compute_reward(ctx: NodeContext[MyResources], inputs: Mapping[str, StepData]) -> StepData:
        reward_fn = ctx.resources.reward_fn
        ...

`inputs` maps each upstream node id to its output; an entry node gets an empty mapping. Engines, reward
functions and the like come in through `ctx.resources`, the typed object the worker's resources factory built
(`WorkerResources.nodes`; the built-in operations read `rl_runtime.nodes.NodeResources`), so an operation never
asks which role it plays.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic

import attrs

from rl_core import nearest_name, registrar
from rl_core.graph import Node, TaskGraph
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers._errors import UnknownOperationError
from rl_runtime.workers._resources import ResourcesT
from rl_runtime.workers._step_data import StepData


@attrs.frozen
class NodeContext(Generic[ResourcesT]):
    """What an operation knows of where it runs: its node, this worker's place, the step and its resources.

    Parameterised by the type of its resources: the built-in operations take a `NodeContext[NodeResources]`.
    """

    node: Node
    """The graph node being run (id, role, params)."""
    rank: int
    """This worker's global rank."""
    dp: DataParallelInfo
    """This worker's data-parallel rank and size for the node's role."""
    step: int
    """The training step being run."""
    resources: ResourcesT
    """Engines, reward functions, loaders: what the worker's resources factory built (`WorkerResources.nodes`)."""
    coordinator: Any = None
    """The CoordinatorClient of the run, or None when the run has none."""


NodeOperation = Callable[[NodeContext[Any], Mapping[str, StepData]], "StepData | Awaitable[StepData]"]

NODE_OPERATIONS: dict[str, NodeOperation] = {}
"""Operation name (as graph nodes name it) -> the function that runs it."""

register_operation = registrar(NODE_OPERATIONS, "node operation")


def bind_operations(graph: TaskGraph, registry: Mapping[str, NodeOperation] | None = None) -> dict[str, NodeOperation]:
    """Node id -> operation for every node of `graph`, in topological order.

    Raises UnknownOperationError naming every node whose operation is not registered, with the nearest
    registered name and the full list.
    """
    registry = NODE_OPERATIONS if registry is None else registry
    missing = [graph[node_id] for node_id in graph.topological_order if graph[node_id].operation not in registry]
    if missing:
        known = ", ".join(sorted(registry)) or "none"
        lines = []
        for node in missing:
            near = nearest_name(node.operation, registry)
            hint = f" (did you mean {near!r}?)" if near else ""
            lines.append(f"node {node.id!r} uses operation {node.operation!r}{hint}")
        raise UnknownOperationError(
            f"graph {graph.graph_id!r}: {'; '.join(lines)}, which is not registered; registered operations: {known}. "
            "Register it with @register_operation(name) in a module imported before the workers start"
        )
    return {node_id: registry[graph[node_id].operation] for node_id in graph.topological_order}
