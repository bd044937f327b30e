"""Running one worker's graph for a step: nodes in topological order, outputs routed locally or by coordinator."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any

from rl_runtime.planning import WorkerAssignment
from rl_runtime.workers._errors import NodeExecutionError, RoutingError, StepDataError
from rl_runtime.workers._local_edges import LocalEdges
from rl_runtime.workers._operations import NodeContext, NodeOperation, bind_operations
from rl_runtime.workers._routing import WorkerRoutes
from rl_runtime.workers._step_data import StepData, check_node_output
from rl_runtime.workers._transport import get_edge, put_edge

logger = logging.getLogger(__name__)

NODE_TIMING_PREFIX = "timing_s/"
"""Each node's wall time is reported as `timing_s/<node id>` (verl's timing namespace, reduced by max)."""
INPUT_WAIT_METRIC = "timing_s/wait_coordinator_inputs"
"""Seconds a step spent taking its inputs from the coordinator (waiting for producers, fetching payloads); reported
only by workers with coordinator input edges. Part of the reading nodes' own `timing_s/<node id>`."""


class GraphExecutor:
    """Runs the task graph of one WorkerAssignment, step by step, in the calling process.

    The tensors each node makes are checked against the sample schema (`check_node_output`) before they are
    routed on, so a wrong dtype, rank or size is named at the node that made it.

    `resources` is what every operation sees as `ctx.resources` (a WorkerResources' `nodes`).

    Operations are bound when it is built (UnknownOperationError names the node and the operation). Batches
    on local edges stay in the worker (`LocalEdges`); coordinator edges need `client` (a CoordinatorClient). A node
    that raises becomes a NodeExecutionError and the step's local batches are dropped. A metric two nodes
    both report keeps the later node's value.
    """

    def __init__(
        self,
        assignment: WorkerAssignment,
        routes: WorkerRoutes,
        resources: object,
        client: Any = None,
        operations: Mapping[str, NodeOperation] | None = None,
    ) -> None:
        self.assignment = assignment
        self.routes = routes
        self.resources = resources
        self.client = client
        self._bound = bind_operations(assignment.graph, operations)
        # The graph is fixed for the executor's life: each node and its data-parallel group, resolved once here
        # rather than looked up in the graph on every step.
        self._nodes = {node_id: (assignment.graph[node_id], assignment.dp_for_node(node_id)) for node_id in self._bound}
        if routes.uses_coordinator and client is None:
            raise RoutingError(
                f"worker rank {assignment.rank} has coordinator edges but no coordinator client; pass one"
            )
        self._store: LocalEdges[StepData] = LocalEdges()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._input_wait_s = 0.0
        self._reads_coordinator = any(not route.local for edges in routes.inputs.values() for route in edges)

    def run_step(self, step: int) -> dict[str, float]:
        """Run every node for `step`; returns the nodes' metrics and timings (never sample tensors)."""
        metrics: dict[str, float] = {}
        self._input_wait_s = 0.0
        for node_id, operation in self._bound.items():
            start = time.perf_counter()
            try:
                output = self._run_node(node_id, operation, step)
            except Exception:
                self._store = LocalEdges()  # a failed step's batches would never be taken
                raise NodeExecutionError(self.assignment.rank, node_id, step, traceback.format_exc()) from None
            metrics.update(output.metrics)
            metrics[f"{NODE_TIMING_PREFIX}{node_id}"] = time.perf_counter() - start
        if self._reads_coordinator:
            metrics[INPUT_WAIT_METRIC] = self._input_wait_s
        return metrics

    def _run_node(self, node_id: str, operation: NodeOperation, step: int) -> StepData:
        node, dp = self._nodes[node_id]
        inputs: dict[str, StepData] = {}
        for route in self.routes.inputs[node_id]:
            if route.local:
                inputs[route.src] = self._store.take(route.key, step)
            else:
                start = time.perf_counter()
                inputs[route.src] = get_edge(self.client, route, step, dp.rank)
                self._input_wait_s += time.perf_counter() - start
        context = NodeContext(node, self.assignment.rank, dp, step, self.resources, self.client)
        output = operation(context, inputs)
        if inspect.isawaitable(output):
            output = self._event_loop().run_until_complete(output)
        if not isinstance(output, StepData):
            raise StepDataError(
                f"operation {node.operation!r} of node {node_id!r} returned {type(output).__name__}; return a StepData"
            )
        check_node_output(output, inputs, f"the batch of node {node_id!r} (operation {node.operation!r})")
        for route in self.routes.outputs[node_id]:
            if route.local:
                self._store.put(route.key, step, output)
            else:
                put_edge(self.client, route, output)
        return output

    def close(self) -> None:
        """Close the event loop async operations ran on (a later async operation opens a new one)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        # One loop for the worker's life, so async engines keep their connections between steps.
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop
