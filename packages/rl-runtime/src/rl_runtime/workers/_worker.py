"""One slot's worker under Ray: the `DAGWorker` actor around a `LocalWorker` (one per slot) and `start_workers`,
which builds one actor for every rank of a placement."""

from __future__ import annotations

import gc
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from rl_coordinator.coordinator import DEFAULT_TIMEOUT_S, CoordinatorClient
from rl_core import load_plugins
from rl_runtime.planning import Placement, WorkerAssignment
from rl_runtime.planning._placement_groups import SlotGroups
from rl_runtime.workers._driver_watch import DriverIdentity, watch_driver
from rl_runtime.workers._errors import WorkerStartError
from rl_runtime.workers._gc_pauses import GC_TIMING, GcPauses, freeze_build_objects
from rl_runtime.workers._host_memory import retain_freed_host_memory
from rl_runtime.workers._local_worker import LocalWorker
from rl_runtime.workers._operations import NodeOperation, bind_operations
from rl_runtime.workers._resources import ResourcesFactory
from rl_runtime.workers._routing import WorkerRoutes, plan_routes

logger = logging.getLogger(__name__)

HEALTH_GROUP = "health"
"""A concurrency group of its own, so `ping` answers while `run_step` is busy."""

DEFAULT_READY_TIMEOUT_S = 300.0
"""Building resources can load a model; five minutes covers a large checkpoint on a slow disk."""
_FRAME = re.compile(r'^\s+File ".*", line \d+')
_MODULE_PREFIX = re.compile(r"^(?:\w+\.)+(?=\w+: )")

DEFAULT_WORKER_OPTIONS: Mapping[str, Any] = {"num_cpus": 1}
"""One CPU per worker: its slot's share of the machine; GPU runs pass `num_gpus` through `actor_options`."""


WORKER_NICENESS = 0
"""The scheduling niceness a DAG worker asks for. Ray starts workers at niceness 15 (`RAY_worker_niceness`) to keep
its own daemons responsive; but DAG workers are the run's compute and meet in collectives, where a niced rank is
preempted by any normal-priority thread: on 2 cores a 0.5 MB gloo all-reduce between two niceness-15 processes
took 1.6-2.7 ms against 0.4 ms at niceness 0, about a fifth of a small model's training step."""


def raise_priority(niceness: int = WORKER_NICENESS) -> int:
    """Set this process's niceness to `niceness` if it is higher and the OS allows it; the niceness in effect.

    Lowering niceness needs privilege (root, CAP_SYS_NICE or RLIMIT_NICE); without it the process keeps Ray's
    niceness (start Ray with RAY_worker_niceness=0 instead, as `rl_runtime.trainer` does when it starts Ray)."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current > niceness:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        except PermissionError:
            logger.info("worker keeps niceness %d: lowering it to %d is not permitted here", current, niceness)
            return current
    return os.getpriority(os.PRIO_PROCESS, 0)


# ray.remote's typed overloads omit concurrency_groups (and so lose ActorClass.options).
@ray.remote(concurrency_groups={HEALTH_GROUP: 1})  # pyright: ignore[reportCallIssue]
class DAGWorker:
    """Runs one WorkerAssignment's graph every step (a `LocalWorker` in its own Ray actor); only metrics leave it.

    Once built it freezes the objects of its build out of the garbage collector's full collections and reports
    each step's time in collections as `timing_s/gc` (`rl_runtime.workers._gc_pauses`). It imports the
    `rl_core.plugins` entry points first (`rl_core.load_plugins`), as the driver does when it loads a run config, so
    the registrations of installed plugins (losses, estimators, engines) exist here too.

    Args:
        assignment: this worker's place (rank, sub-graph, data-parallel info).
        routes: its edges, from `plan_routes`.
        resources_factory: called once here, in the worker process, with `assignment` (see LocalWorker).
        coordinator: the DataCoordinator actor handle, or None when the worker has no coordinator edge.
        operations: operation name -> function; None binds from this process's NODE_OPERATIONS.
        coordinator_timeout_s: how long a consumer waits for its share of a coordinator edge.
        retain_host_memory: keep freed host memory in this process's heap (`retain_freed_host_memory`).
        driver: the driver process; this worker ends itself as soon as it is gone (`watch_driver`).
    """

    def __init__(
        self,
        assignment: WorkerAssignment,
        routes: WorkerRoutes,
        resources_factory: ResourcesFactory | None = None,
        coordinator: Any = None,
        operations: Mapping[str, NodeOperation] | None = None,
        coordinator_timeout_s: float = DEFAULT_TIMEOUT_S,
        retain_host_memory: bool = False,
        driver: DriverIdentity | None = None,
    ) -> None:
        # Before anything looks a name up: the driver loaded the rl_core.plugins entry points when it read the
        # config, but this is a fresh process, where a plugin's estimators and losses are otherwise unknown.
        self.plugins = load_plugins()
        self.watches_driver = watch_driver(driver)
        self.niceness = raise_priority()
        self.retains_host_memory = retain_host_memory and retain_freed_host_memory()
        client = None if coordinator is None else CoordinatorClient(coordinator, timeout_s=coordinator_timeout_s)
        self._worker = LocalWorker(assignment, routes, resources_factory, client, operations)
        self.rank = assignment.rank
        freeze_build_objects()
        self._gc_pauses = GcPauses()

    def ready(self) -> int:
        """This worker's rank, once it is built."""
        return self.rank

    def scheduling_niceness(self) -> int:
        """The niceness this worker's process runs at (see WORKER_NICENESS)."""
        return self.niceness

    def run_step(self, step: int) -> dict[str, float]:
        """Run the graph for `step`; a failing node raises NodeExecutionError. Returns metrics only."""
        return self.run_steps([step])[0]

    def run_steps(self, steps: Sequence[int]) -> list[dict[str, float]]:
        """Run the graph for each of `steps` in order, without returning to the driver in between; their metrics,
        each with the step's `timing_s/gc`."""
        self._gc_pauses.take()  # collections between calls belong to no step
        results = []
        for step in steps:
            metrics = self._worker.run_step(step)
            metrics[GC_TIMING] = self._gc_pauses.take()
            results.append(metrics)
        return results

    def frozen_objects(self) -> int:
        """How many objects of this worker's process are frozen out of garbage collections (`gc.freeze`)."""
        return gc.get_freeze_count()

    def save_checkpoint(self, path: str) -> None:
        """Write this worker's part of a checkpoint under `path` (see WorkerHooks)."""
        self._worker.save_checkpoint(path)

    def load_checkpoint(self, path: str) -> None:
        """Restore this worker's part of the checkpoint in `path` (see WorkerHooks)."""
        self._worker.load_checkpoint(path)

    def evaluate(self, step: int) -> dict[str, float]:
        """This worker's validation metrics after `step` steps (see WorkerHooks)."""
        return self._worker.evaluate(step)

    def catch_up_weights(self, version: int) -> dict[str, float]:
        """Asynchronous training, a split placement's rollout slot: receive weight versions until the rollout engine
        holds `version` (see LocalWorker); its metrics."""
        return self._worker.catch_up_weights(version)

    def close(self) -> None:
        """Release the resources' engines and groups; the actor can be killed afterwards."""
        self._gc_pauses.close()
        self._worker.close()

    @ray.method(concurrency_group=HEALTH_GROUP)
    def ping(self) -> int:
        """Answers with the rank while the worker process lives, even in the middle of a step."""
        return self.rank


def start_workers(
    placement: Placement,
    *,
    resources_factory: ResourcesFactory | None = None,
    coordinator: Any = None,
    edge_batch_sizes: int | Mapping[str, int] = 0,
    coordinator_timeout_s: float = DEFAULT_TIMEOUT_S,
    slots: SlotGroups | None = None,
    actor_options: Mapping[str, Any] | None = None,
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    retain_host_memory: bool = False,
) -> list[Any]:
    """One DAGWorker per rank of `placement` (list index = rank), built and ready.

    Binding and routing are checked here first, so an unregistered operation or an unroutable edge fails before
    any actor starts. The operations bound in this process are shipped to the workers. `slots` pins each rank to
    its reserved slot; `actor_options` override DEFAULT_WORKER_OPTIONS; `retain_host_memory` is passed to every
    worker. Every worker on this host ends itself as soon as this process is gone (`watch_driver`).
    """
    plans = []
    for assignment in placement.workers:
        routes = plan_routes(placement, assignment.rank, edge_batch_sizes)
        bound = bind_operations(assignment.graph)
        operations = {assignment.graph[node_id].operation: fn for node_id, fn in bound.items()}
        plans.append((assignment, routes, operations))
    if coordinator is None and any(routes.uses_coordinator for _, routes, _ in plans):
        raise WorkerStartError("the placement has edges between sub-graphs; start a DataCoordinator and pass it")
    options = {**DEFAULT_WORKER_OPTIONS, **(actor_options or {})}
    driver = DriverIdentity.of_this_process()
    workers = []
    for assignment, routes, operations in plans:
        rank_options = dict(options)
        if slots is not None:
            rank_options["scheduling_strategy"] = slots.strategy_for(assignment.rank)
        workers.append(
            DAGWorker.options(**rank_options).remote(  # pyright: ignore[reportAttributeAccessIssue]  # see @ray.remote
                assignment,
                routes,
                resources_factory,
                coordinator,
                operations,
                coordinator_timeout_s,
                retain_host_memory,
                driver,
            )
        )
    _wait_until_ready(workers, ready_timeout_s)
    logger.info("started %d DAG workers", len(workers))
    return workers


def _wait_until_ready(workers: Sequence[Any], timeout_s: float) -> None:
    """Wait for every worker's `ready` at once, so the first rank to fail is the one reported: ranks that build
    collectively (FSDP, gloo) otherwise sit in a collective with the failed rank until the timeout hides its error.
    On a failure or the timeout every worker is killed and WorkerStartError raised."""
    pending = {worker.ready.remote(): rank for rank, worker in enumerate(workers)}
    deadline = time.monotonic() + timeout_s
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            _kill(workers)
            raise WorkerStartError(
                f"worker rank(s) {sorted(pending.values())} did not finish building their resources within "
                f"{timeout_s:g} s (the others did); look for a rank stuck in a collective or a rendezvous in the "
                "workers' logs"
            )
        rank = pending.pop(done[0])
        try:
            ray.get(done[0])
        except Exception as failure:
            _kill(workers)
            raise WorkerStartError(f"worker rank {rank} failed to start: {build_failure(str(failure))}") from failure


def build_failure(text: str) -> str:
    """What a worker's build raised, from Ray's text of the actor's death (the actor's address, then the traceback):
    the exception's own lines after the last frame, `module.Error: message` as `Error: message`, so the message (a
    bad row, a missing model folder) is what the user reads first; the whole text when it holds no traceback (a
    process killed from outside). The full text stays in the raised error's cause, for the log."""
    lines = text.splitlines()
    frames = [index for index, line in enumerate(lines) if _FRAME.match(line)]
    if not frames:
        return text
    after = lines[frames[-1] + 1 :]
    start = next((index for index, line in enumerate(after) if line.strip() and not line[0].isspace()), None)
    if start is None:
        return text
    return _MODULE_PREFIX.sub("", "\n".join(after[start:]).strip())


def _kill(workers: Sequence[Any]) -> None:
    for worker in workers:
        ray.kill(worker)
