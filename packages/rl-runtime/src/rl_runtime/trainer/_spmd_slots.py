"""A Trainer's slots under torchrun: this process is one slot (rank RANK of WORLD_SIZE) and runs its worker itself.

The worker is the `LocalWorker` a Ray `DAGWorker` wraps, built by the same `RunResourcesFactory` from the same
placement; the training roles shard over the torch.distributed world torchrun set up (no rendezvous actor), and
an `SPMDDriver` gathers the ranks' metric dicts over a gloo group. Colocated placement only (`resolve_launch`
refuses split placement); a rebalance node (`batch.balance_across_ranks`) exchanges samples through an
`SPMDEdgeClient` instead of Ray's DataCoordinator. A rank that fails stops the others, each naming it
(`stop_together`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rl_runtime.nodes._rebalance import REBALANCE_OPERATION
from rl_runtime.trainer._launch import Launch, join_spmd, leave_spmd
from rl_runtime.trainer._worker_state import RunResourcesFactory
from rl_runtime.workers import LocalWorker, SPMDDriver, StepResult, bind_operations, plan_routes
from rl_runtime.workers._spmd import SPMDEdgeClient, stop_together

if TYPE_CHECKING:
    from rl_runtime.trainer._loop import Trainer

logger = logging.getLogger(__name__)


class SPMDSlots:
    """This rank's worker and the driver that meets the other ranks; the interface of `RaySlots`."""

    def __init__(self, trainer: Trainer, launch: Launch) -> None:
        self.trainer = trainer
        self.launch = launch
        self.is_leader = launch.is_leader
        self._driver: SPMDDriver | None = None

    def start(self) -> None:
        """Join torch.distributed and build this rank's worker (its engines meet the other ranks' here)."""
        config = self.trainer.config
        group = join_spmd(self.launch, config.trainer.step_timeout_s)
        assignment = self.trainer.placement.worker(self.launch.rank)
        routes = plan_routes(self.trainer.placement, self.launch.rank)
        operations = {assignment.graph[node].operation: fn for node, fn in bind_operations(assignment.graph).items()}
        factory = RunResourcesFactory(
            config,
            self.trainer.task_factory,
            self.trainer.total_steps,
            self.trainer.plan,
            extras=self.trainer.extras_factory,
        )
        # A rebalance node moves samples between ranks: over torch.distributed here, as Ray's coordinator does.
        rebalances = any(node.operation == REBALANCE_OPERATION for node in assignment.graph.nodes.values())
        client = SPMDEdgeClient(group) if rebalances else None
        # Engines build collectively (FSDP): a rank that fails here must not leave the others waiting unnamed.
        worker = stop_together(
            "building its worker", lambda: LocalWorker(assignment, routes, factory, client, operations)
        )
        self._driver = SPMDDriver(worker, group)
        logger.info("rank %d of %d started its worker", self.launch.rank, self.launch.world_size)

    @property
    def driver(self) -> SPMDDriver:
        assert self._driver is not None, "start the slots first"
        return self._driver

    in_flight = 0
    """Always synchronous: asynchronous training needs split placement, which torchrun refuses."""

    def run_steps(self, steps: Sequence[int], horizon: int | None = None) -> list[StepResult]:
        """Run `steps` on this rank; each step's metrics merged over every rank (`horizon` is for asynchronous
        training, which needs Ray)."""
        return self.driver.run_steps(steps)

    def drain(self, next_step: int) -> list[StepResult]:
        """Nothing runs ahead under torchrun."""
        return []

    def evaluate(self, step: int) -> list[dict[str, float]]:
        """Every rank's validation metrics after `step` steps, by rank."""
        return self.driver.evaluate(step)

    def save_checkpoint(self, path: str) -> None:
        """This rank writes its part of a checkpoint under `path`; returns when every rank has."""
        self.driver.save_checkpoint(path)

    def load_checkpoint(self, path: str) -> None:
        """This rank restores its part of the checkpoint in `path`; returns when every rank has."""
        self.driver.load_checkpoint(path)

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        self.driver.barrier()

    def close(self, *, abandon: bool = False) -> None:
        """Close this rank's worker, then leave torch.distributed once every rank has (unless `abandon`)."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None
            if not abandon:
                leave_spmd()
