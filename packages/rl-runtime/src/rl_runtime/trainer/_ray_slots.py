"""A Trainer's slots under Ray: this process is the driver and every slot is a DAG worker actor (`start_workers`),
with a DataCoordinator actor when samples cross ranks. `TrainingSession` drives it as it drives `SPMDSlots`."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ray

from rl_coordinator.coordinator import start_coordinator
from rl_engines.reward_model import RewardModelPlacement
from rl_runtime.nodes._continuous import rollout_steps_ahead
from rl_runtime.nodes._rebalance import REBALANCE_OPERATION
from rl_runtime.planning._config import SlotGroupConfig
from rl_runtime.planning._placement_groups import SlotGroups, create_slot_groups
from rl_runtime.planning._ray_rendezvous import ActorRendezvous
from rl_runtime.trainer._engines import device_name
from rl_runtime.trainer._reward_slots import RewardSlots
from rl_runtime.trainer._split import RECEIVE_WEIGHTS_NODE, is_split, rollout_subgraph, train_subgraph
from rl_runtime.trainer._worker_state import RunResourcesFactory
from rl_runtime.workers import Driver, StepResult, start_workers
from rl_runtime.workers._driver_async import PipelinedDriver
from rl_runtime.workers._routing import edge_key
from rl_runtime.workers._worker import WORKER_NICENESS

if TYPE_CHECKING:
    from rl_runtime.trainer._loop import Trainer

logger = logging.getLogger(__name__)

RAY_WORKER_NICENESS_ENV = "RAY_worker_niceness"
"""Ray's setting of the niceness its raylet starts workers at (15 unless set)."""
CLOSE_TIMEOUT_S = 60.0
"""Workers get this long to shut their engines down before they are killed."""


class RaySlots:
    """Starts Ray (unless running), reserves the slots, starts one DAG worker per slot; `close` undoes it all."""

    is_leader = True
    """The Ray driver writes the run folder's shared files."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.config = trainer.config
        self._owns_ray = False
        self._slots: SlotGroups | None = None
        self._workers: list[Any] = []
        self._coordinator: Any = None
        self._reward_slots: RewardSlots | None = None
        self._driver: Driver | PipelinedDriver | None = None

    def start(self) -> None:
        """Start Ray when it is not running, then the workers; on a failure, `close` before raising."""
        try:
            self._owns_ray = not ray.is_initialized()
            if self._owns_ray:
                # The raylet started here spawns the workers; unprivileged workers cannot lower their niceness later.
                os.environ.setdefault(RAY_WORKER_NICENESS_ENV, str(WORKER_NICENESS))
                ray.init(num_cpus=max(self.trainer.slots, os.cpu_count() or 1), include_dashboard=False)
            self._start_workers()
        except BaseException:
            self.close()
            raise

    def _start_workers(self) -> None:
        placement = self.trainer.placement
        settings = placement.config
        use_gpu = device_name(self.config) == "cuda"
        self._slots = create_slot_groups(settings.num_nodes, settings.slots_per_node, SlotGroupConfig(use_gpu=use_gpu))
        split = is_split(placement)
        train_dp = len(train_subgraph(placement).ranks)
        section = self.config.reward_model
        if section is not None and section.placement is RewardModelPlacement.SLOT:
            self._reward_slots = RewardSlots.start(section, device_name(self.config), use_gpu=use_gpu)
        factory = RunResourcesFactory(
            self.config,
            self.trainer.task_factory,
            self.trainer.total_steps,
            self.trainer.plan,
            ActorRendezvous.start() if train_dp > 1 else None,
            split=split,
            weight_exchange=ActorRendezvous.start() if split else None,
            extras=self.trainer.extras_factory,
            reward_models=self._reward_slots.handles if self._reward_slots is not None else (),
        )
        options = {"num_cpus": 1, "num_gpus": 1 if use_gpu else 0}
        rebalances = any(n.operation == REBALANCE_OPERATION for n in self.trainer.graph.nodes.values())
        if split or (placement.world_size > 1 and rebalances):
            # Samples cross between sub-graphs, or between ranks in a rebalance, through the coordinator by reference.
            self._coordinator = start_coordinator()
        samples = self.trainer.plan.samples_per_step
        crossing = {edge_key(dep.upstream_node, dep.downstream_node): samples for dep in placement.cross_dependencies}
        self._workers = start_workers(
            placement,
            resources_factory=factory,
            coordinator=self._coordinator,
            edge_batch_sizes=crossing,
            coordinator_timeout_s=self.config.trainer.step_timeout_s,
            slots=self._slots,
            actor_options=options,
            retain_host_memory=self.config.placement.retain_host_memory,
        )
        self._driver = self._make_driver(split)

    def _make_driver(self, split: bool) -> Driver | PipelinedDriver:
        """The synchronous driver, or with `algorithm.max_staleness` > 0 on a split placement the pipelined one (the
        synchronous one where the rollout slots run no step ahead: continuous generation at eta 1, whose overlap is
        the requests in flight while training runs)."""
        timeout_s = self.config.trainer.step_timeout_s
        ahead = rollout_steps_ahead(self.config)
        if ahead == 0 or not split:
            return Driver(self._workers, timeout_s)
        placement = self.trainer.placement
        return PipelinedDriver(
            self._workers,
            timeout_s,
            rollout_ranks=rollout_subgraph(placement).ranks,
            nodes={worker.rank: worker.graph.topological_order for worker in placement.workers},
            receive_node=RECEIVE_WEIGHTS_NODE,
            max_staleness=ahead,
        )

    @property
    def in_flight(self) -> int:
        """Rollout steps the pipelined driver ran ahead of training (0 when synchronous)."""
        return self._driver.in_flight if isinstance(self._driver, PipelinedDriver) else 0

    def run_steps(self, steps: Sequence[int], horizon: int | None = None) -> list[StepResult]:
        """Run `steps` on every worker (one call each); each step's merged metrics. `horizon`: see
        `TrainingSession.steps` (asynchronous training only)."""
        assert self._driver is not None, "start the slots first"
        if isinstance(self._driver, PipelinedDriver):
            return self._driver.run_steps(steps, horizon)
        return self._driver.run_steps(steps)

    def drain(self, next_step: int) -> list[StepResult]:
        """Train the steps already rolled out ahead (asynchronous training); nothing when synchronous."""
        if not isinstance(self._driver, PipelinedDriver):
            return []
        return self._driver.drain(next_step)

    def evaluate(self, step: int) -> list[dict[str, float]]:
        """Every worker's validation metrics after `step` steps, by rank."""
        return ray.get([worker.evaluate.remote(step) for worker in self._workers])

    def save_checkpoint(self, path: str) -> None:
        """Every worker writes its part of a checkpoint under `path`."""
        ray.get([worker.save_checkpoint.remote(path) for worker in self._workers])

    def load_checkpoint(self, path: str) -> None:
        """Every worker restores its part of the checkpoint in `path`."""
        ray.get([worker.load_checkpoint.remote(path) for worker in self._workers])

    def barrier(self) -> None:
        """Nothing to wait for: this one process drives every slot."""

    def close(self, *, abandon: bool = False) -> None:
        """Close and kill the workers, release the slots, and stop Ray if `start` started it; `abandon` kills the
        workers at once (a step abandoned by a second Ctrl-C would otherwise finish before they close)."""
        if self._workers:
            try:
                if not abandon:
                    ray.get([worker.close.remote() for worker in self._workers], timeout=CLOSE_TIMEOUT_S)
            except Exception as error:  # a dead or hung worker must not stop the others from being killed
                logger.warning("closing the workers failed (%s); killing them", error)
            for worker in self._workers:
                ray.kill(worker)
            self._workers = []
        if self._reward_slots is not None:
            self._reward_slots.close()
            self._reward_slots = None
        if self._coordinator is not None:
            ray.kill(self._coordinator)
            self._coordinator = None
        if self._slots is not None:
            self._slots.remove()
            self._slots = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
