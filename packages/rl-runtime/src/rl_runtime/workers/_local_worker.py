"""`LocalWorker`: one slot's graph executor and hooks in the calling process, the step code every launcher runs
(inside a Ray `DAGWorker` actor, or in a torchrun rank itself); it needs no Ray."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rl_runtime.planning import WorkerAssignment
from rl_runtime.workers._errors import WorkerError
from rl_runtime.workers._executor import GraphExecutor
from rl_runtime.workers._operations import NodeOperation
from rl_runtime.workers._resources import ResourcesFactory, WorkerHooks, WorkerResources, unpack_resources
from rl_runtime.workers._routing import WorkerRoutes


def _no_resources(assignment: WorkerAssignment) -> WorkerResources[None]:
    return WorkerResources(None)


class LocalWorker:
    """One slot's graph executor and hooks, run in the calling process: the body of a Ray `DAGWorker` and of a
    torchrun rank (`rl_runtime.workers.SPMDDriver`), so both launchers run the same step code.

    Args:
        assignment: this worker's place (rank, sub-graph, data-parallel info).
        routes: its edges, from `plan_routes`.
        resources_factory: called once here with `assignment`; its WorkerResources' `nodes` is every operation's
            `ctx.resources`, its `hooks` serve checkpoints, evaluation and `close`.
        client: a CoordinatorClient, or None when the worker has no coordinator edge.
        operations: operation name -> function; None binds from this process's NODE_OPERATIONS.
    """

    def __init__(
        self,
        assignment: WorkerAssignment,
        routes: WorkerRoutes,
        resources_factory: ResourcesFactory | None = None,
        client: Any = None,
        operations: Mapping[str, NodeOperation] | None = None,
    ) -> None:
        resources = unpack_resources((resources_factory or _no_resources)(assignment), assignment.rank)
        self._executor = GraphExecutor(assignment, routes, resources.nodes, client, operations)
        self._hooks = resources.hooks
        self.rank = assignment.rank

    def run_step(self, step: int) -> dict[str, float]:
        """Run the graph for `step`; a failing node raises NodeExecutionError. Returns metrics only."""
        return self._executor.run_step(step)

    def run_steps(self, steps: Sequence[int]) -> list[dict[str, float]]:
        """Run the graph for each of `steps` in order; their metrics."""
        return [self._executor.run_step(step) for step in steps]

    def save_checkpoint(self, path: str) -> None:
        """Write this worker's part of a checkpoint under `path` (see WorkerHooks)."""
        self._require_hooks("save_checkpoint").save_checkpoint(path)

    def load_checkpoint(self, path: str) -> None:
        """Restore this worker's part of the checkpoint in `path` (see WorkerHooks)."""
        self._require_hooks("load_checkpoint").load_checkpoint(path)

    def evaluate(self, step: int) -> dict[str, float]:
        """This worker's validation metrics after `step` steps (see WorkerHooks)."""
        return self._require_hooks("evaluate").evaluate(step)

    def catch_up_weights(self, version: int) -> dict[str, float]:
        """Asynchronous training, a split placement's rollout slot: receive weight versions until the rollout engine
        holds `version` (the hooks' `catch_up_weights`); its metrics."""
        hooks = self._require_hooks("catch_up_weights")
        catch_up = getattr(hooks, "catch_up_weights", None)
        if catch_up is None:
            raise WorkerError(
                f"worker rank {self.rank} cannot catch_up_weights: its hooks ({type(hooks).__name__}) have no "
                "catch_up_weights method; asynchronous training needs the runtime's RunHooks"
            )
        return catch_up(version)

    def close(self) -> None:
        """Release the resources' engines and groups."""
        self._executor.close()
        if self._hooks is not None:
            self._hooks.close()

    def _require_hooks(self, action: str) -> WorkerHooks:
        if self._hooks is None:
            raise WorkerError(
                f"worker rank {self.rank} cannot {action}: its WorkerResources.hooks is None; build the workers with "
                "a resources factory that provides WorkerHooks"
            )
        return self._hooks
