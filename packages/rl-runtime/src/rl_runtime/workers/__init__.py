"""DAG workers: one Ray actor per slot runs its sub-graph's nodes each step; only metrics reach the driver. Under
torchrun each process is one slot instead: a `LocalWorker` (the same step code) driven by an `SPMDDriver`.

    @register_operation("fake_generate")
    def fake_generate(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
        return StepData({"uid": ..., "input_ids": ...}, metrics={"gen/num_samples": 4.0})

    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(graph)
    workers = start_workers(placement, resources_factory=lambda a: WorkerResources(make_engines(a)),
                            coordinator=start_coordinator(), edge_batch_sizes=8)
    for result in run_steps(workers, steps=2, timeout_s=600):
        print(result.metrics)

Operations are bound by the name graph nodes give (`NODE_OPERATIONS`); an unregistered name fails at start.
Edges between nodes on the same ranks stay in the worker (the executor's `LocalEdges`); edges between sub-graphs go
through the DataCoordinator, keyed `"<src>-><dst>"` and by step. Faults reach the driver as
`NodeExecutionError` (rank, node, step, traceback) or `WorkerLostError` (rank); under torchrun the ranks that did not
fail raise `RankFailedError`, naming the rank that did.

`Driver`, `run_steps` and `start_workers` import Ray on first use; the rest runs in a torchrun rank without Ray.
"""

from typing import TYPE_CHECKING

from rl_core import lazy_exports
from rl_runtime.workers._errors import (
    NodeExecutionError,
    RankFailedError,
    StepDataError,
    WorkerError,
    WorkerLostError,
)
from rl_runtime.workers._executor import NODE_TIMING_PREFIX
from rl_runtime.workers._local_worker import LocalWorker
from rl_runtime.workers._operations import (
    NODE_OPERATIONS,
    NodeContext,
    NodeOperation,
    bind_operations,
    register_operation,
)
from rl_runtime.workers._resources import ResourcesFactory, WorkerHooks, WorkerResources
from rl_runtime.workers._routing import plan_routes
from rl_runtime.workers._spmd import SPMDDriver
from rl_runtime.workers._step_data import StepData
from rl_runtime.workers._step_result import StepResult

if TYPE_CHECKING:
    from rl_runtime.workers._driver import Driver, run_steps
    from rl_runtime.workers._worker import start_workers

_NEED_RAY = {"Driver": "_driver", "run_steps": "_driver", "start_workers": "_worker"}
"""The names whose modules import Ray, imported on first use: a torchrun rank (no Ray) uses the rest."""


__getattr__ = lazy_exports(__name__, _NEED_RAY)


__all__ = [
    "NODE_OPERATIONS",
    "NODE_TIMING_PREFIX",
    "Driver",
    "LocalWorker",
    "NodeContext",
    "NodeExecutionError",
    "NodeOperation",
    "RankFailedError",
    "ResourcesFactory",
    "SPMDDriver",
    "StepData",
    "StepDataError",
    "StepResult",
    "WorkerError",
    "WorkerHooks",
    "WorkerLostError",
    "WorkerResources",
    "bind_operations",
    "plan_routes",
    "register_operation",
    "run_steps",
    "start_workers",
]
