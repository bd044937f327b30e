"""`TrainingSession`: a Trainer's workers, started and restored, driven one step (or validation, or save) at a time.

with Trainer(config, task_factory).session() as run:
    while run.next_step < trainer.total_steps:
        metrics = run.step()
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import ray

from rl_coordinator.coordinator import start_coordinator
from rl_runtime.metrics._perf import compute_throughput_metrics
from rl_runtime.nodes._rebalance import REBALANCE_OPERATION
from rl_runtime.planning._config import SlotGroupConfig
from rl_runtime.planning._placement_groups import SlotGroups, create_slot_groups
from rl_runtime.planning._rendezvous import ActorRendezvous
from rl_runtime.trainer import _checkpoints as checkpoints
from rl_runtime.trainer._engines import device_name
from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._lock import acquire_run_lock, release_run_lock
from rl_runtime.trainer._split import RECEIVE_WEIGHTS_NODE, is_split, rollout_subgraph, train_subgraph
from rl_runtime.trainer._validation import reduce_validation
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
DRIVER_BYTES_METRIC = "perf/driver_received_bytes"
"""What the driver received this step (pickled metric dicts): evidence that no sample passed through it."""


class TrainingSession:
    """The running workers of one Trainer. Entering starts Ray (unless running), reserves the slots, starts the
    workers and restores the resume checkpoint; leaving closes and kills them."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.config = trainer.config
        self.start_step = 0
        self.next_step = 0
        self._owns_ray = False
        self._slots: SlotGroups | None = None
        self._workers: list[Any] = []
        self._coordinator: Any = None
        self._driver: Driver | None = None
        self._locked = False

    def __enter__(self) -> TrainingSession:
        acquire_run_lock(self.trainer.run_dir, take_over=self.config.trainer.take_over)
        self._locked = True
        try:
            self._owns_ray = not ray.is_initialized()
            if self._owns_ray:
                # The raylet started here spawns the workers; unprivileged workers cannot lower their niceness later.
                os.environ.setdefault(RAY_WORKER_NICENESS_ENV, str(WORKER_NICENESS))
                ray.init(num_cpus=max(self.trainer.slots, os.cpu_count() or 1), include_dashboard=False)
            self._start()
            self.start_step = self.next_step = self._restore()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        abandoned = isinstance(error, KeyboardInterrupt) or getattr(error, "abandoned", False)
        self.close(abandon=abandoned)

    def _start(self) -> None:
        placement = self.trainer.placement
        settings = placement.config
        use_gpu = device_name(self.config) == "cuda"
        self._slots = create_slot_groups(settings.num_nodes, settings.slots_per_node, SlotGroupConfig(use_gpu=use_gpu))
        logger.info("placement:\n%s", placement.describe())
        logger.info("batch plan:\n%s", self.trainer.plan.describe())
        split = is_split(placement)
        train_dp = len(train_subgraph(placement).ranks)
        factory = RunResourcesFactory(
            self.config,
            self.trainer.task_factory,
            self.trainer.total_steps,
            self.trainer.plan,
            ActorRendezvous.start() if train_dp > 1 else None,
            split=split,
            weight_exchange=ActorRendezvous.start() if split else None,
            extras=self.trainer.extras_factory,
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

    def _make_driver(self, split: bool) -> Driver:
        """The synchronous driver, or with `algorithm.max_staleness` > 0 on a split placement the pipelined one."""
        timeout_s = self.config.trainer.step_timeout_s
        eta = self.config.algorithm.max_staleness
        if eta == 0 or not split:
            return Driver(self._workers, timeout_s)
        placement = self.trainer.placement
        return PipelinedDriver(
            self._workers,
            timeout_s,
            rollout_ranks=rollout_subgraph(placement).ranks,
            nodes={worker.rank: worker.graph.topological_order for worker in placement.workers},
            receive_node=RECEIVE_WEIGHTS_NODE,
            max_staleness=eta,
        )

    def step(self) -> dict[str, float]:
        """Run training step `next_step` on every worker; its metrics, with throughput and timing added."""
        return self.steps(1)[0]

    def steps(self, count: int, *, horizon: int | None = None) -> list[dict[str, float]]:
        """Run the next `count` training steps, one call per worker; each step's metrics, in order.

        Timing and throughput of each step are the call's wall time shared evenly over its steps. In asynchronous
        training (`algorithm.max_staleness` > 0, split placement) the rollout slots run ahead up to, not past,
        `horizon` (the next step that needs the pipeline drained: a validation, a checkpoint or the end; default
        the step after these `count`)."""
        assert self._driver is not None, "use the session as a context manager"
        start = time.perf_counter()
        numbers = range(self.next_step, self.next_step + count)
        if isinstance(self._driver, PipelinedDriver):
            results = self._driver.run_steps(numbers, horizon)
        else:
            results = self._driver.run_steps(numbers)
        return self._step_metrics(results, (time.perf_counter() - start) / count)

    def drain(self) -> list[dict[str, float]]:
        """Asynchronous training: run the training steps whose samples the rollout slots already made, so that
        nothing is in flight (before a checkpoint on a stop); their metrics (none when synchronous or drained)."""
        if not isinstance(self._driver, PipelinedDriver) or self._driver.in_flight == 0:
            return []
        start = time.perf_counter()
        results = self._driver.drain(self.next_step)
        return self._step_metrics(results, (time.perf_counter() - start) / max(1, len(results)))

    def _step_metrics(self, results: list[StepResult], seconds: float) -> list[dict[str, float]]:
        history = []
        for result in results:
            metrics = dict(result.metrics)
            metrics["timing_s/step"] = seconds
            tokens = int(metrics.get("perf/total_num_tokens", 0))
            metrics.update(
                compute_throughput_metrics(total_num_tokens=tokens, step_seconds=seconds, n_gpus=self.trainer.slots)
            )
            metrics["training/epoch"] = float(self.next_step // self.trainer.steps_per_epoch)
            metrics[DRIVER_BYTES_METRIC] = float(result.received_bytes)
            self.next_step += 1
            history.append(metrics)
        return history

    def _require_drained(self, action: str) -> None:
        if isinstance(self._driver, PipelinedDriver) and self._driver.in_flight:
            raise TrainerError(
                f"cannot {action} with {self._driver.in_flight} asynchronous rollout step(s) in flight after step "
                f"{self.next_step}: pass the step as the horizon of `steps`, or call `drain` first"
            )

    def validate(self) -> dict[str, float]:
        """Validation metrics of the current policy over the held-out files (empty without them)."""
        self._require_drained("validate")
        start = time.perf_counter()
        per_rank = ray.get([worker.evaluate.remote(self.next_step) for worker in self._workers])
        k = self.config.rollout.val_samples_per_prompt
        metrics = reduce_validation([rank for rank in per_rank if rank], k)
        if metrics:
            metrics["timing_s/testing"] = time.perf_counter() - start
        return metrics

    def save(self) -> Path:
        """Commit a checkpoint of the steps done so far; prune to `trainer.keep_last`."""
        self._require_drained("save a checkpoint")
        done, start = self.next_step, time.perf_counter()
        root = checkpoints.checkpoint_root(self.trainer.run_dir)
        partial = checkpoints.begin_checkpoint(root, done)
        ray.get([worker.save_checkpoint.remote(str(partial)) for worker in self._workers])
        state = {
            "step": done,
            "total_steps": self.trainer.total_steps,
            "slots": self.trainer.slots,
            checkpoints.COLOCATE_KEY: self.config.placement.colocate,
            "pipeline": self.config.pipeline,
        }
        folder = checkpoints.commit_checkpoint(partial, state)
        removed = checkpoints.prune_checkpoints(root, self.config.trainer.keep_last)
        logger.info(
            "saved checkpoint %s in %.3f s%s",
            folder,
            time.perf_counter() - start,
            f" (removed {len(removed)} older)" if removed else "",
        )
        return folder

    def _restore(self) -> int:
        folder = self.trainer.resume_from
        if folder is None:
            return 0
        state = checkpoints.read_state(folder)
        ray.get([worker.load_checkpoint.remote(str(folder)) for worker in self._workers])
        logger.info("resumed from %s after %d steps", folder, state["step"])
        return int(state["step"])

    def close(self, *, abandon: bool = False) -> None:
        """Close and kill the workers, release the slots, and stop Ray if this session started it; `abandon` kills
        the workers at once (a step abandoned by a second Ctrl-C would otherwise finish before they close)."""
        if self._workers:
            try:
                if not abandon:
                    ray.get([worker.close.remote() for worker in self._workers], timeout=CLOSE_TIMEOUT_S)
            except Exception as error:  # a dead or hung worker must not stop the others from being killed
                logger.warning("closing the workers failed (%s); killing them", error)
            for worker in self._workers:
                ray.kill(worker)
            self._workers = []
        if self._coordinator is not None:
            ray.kill(self._coordinator)
            self._coordinator = None
        if self._slots is not None:
            self._slots.remove()
            self._slots = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
        if self._locked:  # last: no worker of ours can write into the folder any more
            release_run_lock(self.trainer.run_dir)
            self._locked = False
