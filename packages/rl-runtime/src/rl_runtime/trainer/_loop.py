"""`Trainer`: the run's driver. Plans the pipeline on the slots, starts one DAG worker per slot, runs the steps,
validates, checkpoints and resumes. Only metrics and control calls pass through it, never samples."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import attrs
import ray
import yaml

from rl_core.graph import TaskGraph, get_pipeline
from rl_runtime.config import RESUME_AUTO, RESUME_NEVER, BatchPlan, RunConfig, is_pipeline_file, unstructure
from rl_runtime.metrics import MetricsLogger, SinkContext, compute_throughput_metrics
from rl_runtime.nodes import TaskFactory
from rl_runtime.planning import (
    ActorRendezvous,
    SchedulerConfig,
    SlotGroupConfig,
    SlotGroups,
    TaskScheduler,
    create_slot_groups,
)
from rl_runtime.trainer import _checkpoints as checkpoints
from rl_runtime.trainer._data import open_files, steps_per_epoch
from rl_runtime.trainer._engines import device_name
from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._validation import reduce_validation
from rl_runtime.trainer._worker_state import RunResourcesFactory
from rl_runtime.workers import Driver, start_workers

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 60.0
"""Workers get this long to shut their engines down before they are killed."""
DRIVER_BYTES_METRIC = "perf/driver_received_bytes"
"""What the driver received this step (pickled metric dicts): evidence that no sample passed through it."""


@attrs.frozen
class TrainResult:
    """What a finished `fit` did."""

    run_dir: Path
    start_step: int
    """Steps already done when this process started (a resumed run)."""
    end_step: int
    history: tuple[dict[str, float], ...]
    """Each step's metrics, in order, from `start_step + 1` to `end_step`."""
    validations: tuple[tuple[int, dict[str, float]], ...]
    """(steps done, validation metrics) of every validation pass."""
    last_checkpoint: Path | None


def load_pipeline(pipeline: str) -> TaskGraph:
    """The built-in pipeline `pipeline`, or the TaskGraph described by a pipeline YAML file."""
    if not is_pipeline_file(pipeline):
        return get_pipeline(pipeline)
    path = Path(pipeline)
    if not path.is_file():
        raise TrainerError(f"pipeline: {pipeline!r} is not a file; give a pipeline YAML or a built-in name")
    return TaskGraph.from_dict(yaml.safe_load(path.read_text()))


class Trainer:
    """Runs a RunConfig with the task `task_factory` builds in each worker.

    Colocated placement only: every slot runs the whole pipeline (rollout, reference, actor, critic) on its
    share of the data, and the training roles shard over all slots with FSDP2.
    """

    def __init__(self, config: RunConfig, task_factory: TaskFactory) -> None:
        if not config.placement.colocate:
            raise TrainerError(
                "placement.colocate=false (split placement) is not run by the built-in trainer yet; set "
                "placement.colocate=true (every slot runs the whole pipeline)"
            )
        if config.rollout.temperature == 0:
            raise TrainerError("rollout.temperature=0 samples greedily, which RL training cannot learn from; use > 0")
        self.config = config
        self.task_factory = task_factory
        self.slots = config.placement.slots
        self.plan = BatchPlan.from_config(config, rollout_dp=self.slots, train_dp=self.slots)
        self.graph = load_pipeline(config.pipeline)
        train_rows = len(open_files(config.data.train_files, "data.train_files"))
        self.steps_per_epoch = steps_per_epoch(train_rows, self.plan)
        self.total_steps = config.trainer.total_steps or config.trainer.total_epochs * self.steps_per_epoch
        self.run_dir = Path(config.trainer.output_dir)
        self.resume_from = self._resume_folder()

    def _resume_folder(self) -> Path | None:
        resume = self.config.trainer.resume
        if resume == RESUME_NEVER:
            return None
        if resume == RESUME_AUTO:
            return checkpoints.latest_checkpoint(checkpoints.checkpoint_root(self.run_dir))
        folder = Path(resume)
        checkpoints.read_state(folder)
        return folder

    def fit(self) -> TrainResult:
        """Train to `total_steps` (resuming first when asked); returns the metrics of the steps run here."""
        owns_ray = not ray.is_initialized()
        if owns_ray:
            ray.init(num_cpus=max(self.slots, os.cpu_count() or 1), include_dashboard=False)
        slots: SlotGroups | None = None
        workers: list[Any] = []
        try:
            slots_per_node = self.config.placement.slots_per_node or self.slots
            num_nodes = self.slots // slots_per_node
            use_gpu = device_name(self.config) == "cuda"
            slots = create_slot_groups(num_nodes, slots_per_node, SlotGroupConfig(use_gpu=use_gpu))
            workers = self._start_workers(slots, num_nodes, slots_per_node, use_gpu)
            return self._run(workers)
        finally:
            _close_workers(workers)
            if slots is not None:
                slots.remove()
            if owns_ray:
                ray.shutdown()

    def _start_workers(self, slots: SlotGroups, num_nodes: int, slots_per_node: int, use_gpu: bool) -> list[Any]:
        settings = self.config.placement
        scheduler = TaskScheduler(
            SchedulerConfig(
                num_nodes=num_nodes,
                slots_per_node=slots_per_node,
                strategy=settings.strategy.value,
                colocate=True,
                node_cohesion=settings.node_cohesion,
                node_load=settings.node_load,
            )
        )
        placement = scheduler.schedule(self.graph)
        logger.info("placement:\n%s", placement.describe())
        logger.info("batch plan:\n%s", self.plan.describe())
        factory = RunResourcesFactory(
            self.config,
            self.task_factory,
            self.total_steps,
            placement.world_size,
            ActorRendezvous.start() if placement.world_size > 1 else None,
        )
        options = {"num_cpus": 1, "num_gpus": 1 if use_gpu else 0}
        return start_workers(placement, resources_factory=factory, slots=slots, actor_options=options)

    def _run(self, workers: list[Any]) -> TrainResult:
        trainer = self.config.trainer
        start_step = self._restore(workers)
        context = SinkContext(
            run_dir=self.run_dir,
            project_name=trainer.project_name,
            experiment_name=trainer.experiment_name,
            total_steps=self.total_steps,
            start_step=start_step,
            hyperparameters=unstructure(self.config),
        )
        driver = Driver(workers, trainer.step_timeout_s)
        history: list[dict[str, float]] = []
        validations: list[tuple[int, dict[str, float]]] = []
        last_checkpoint = self.resume_from
        with MetricsLogger.from_names(trainer.log_sinks, context) as sinks:
            if trainer.validate_before_train and start_step == 0 and self.config.data.val_files:
                validations.append((0, self._validate(workers)))
                sinks.log(0, validations[-1][1])
            for step in range(start_step, self.total_steps):
                metrics = self._train_step(driver, step)
                done = step + 1
                if trainer.validate_every and done % trainer.validate_every == 0 and self.config.data.val_files:
                    validations.append((done, self._validate(workers)))
                    metrics.update(validations[-1][1])
                sinks.log(done, metrics)
                history.append(metrics)
                if (trainer.checkpoint_every and done % trainer.checkpoint_every == 0) or done == self.total_steps:
                    last_checkpoint = self._save(workers, done)
        return TrainResult(
            self.run_dir, start_step, self.total_steps, tuple(history), tuple(validations), last_checkpoint
        )

    def _train_step(self, driver: Driver, step: int) -> dict[str, float]:
        start = time.perf_counter()
        result = driver.run_step(step)
        seconds = time.perf_counter() - start
        metrics = dict(result.metrics)
        metrics["timing_s/step"] = seconds
        tokens = int(metrics.get("perf/total_num_tokens", 0))
        metrics.update(compute_throughput_metrics(total_num_tokens=tokens, step_seconds=seconds, n_gpus=self.slots))
        metrics["training/epoch"] = float(step // self.steps_per_epoch)
        metrics[DRIVER_BYTES_METRIC] = float(result.received_bytes)
        return metrics

    def _validate(self, workers: list[Any]) -> dict[str, float]:
        start = time.perf_counter()
        per_rank = ray.get([worker.evaluate.remote(0) for worker in workers])
        metrics = reduce_validation([rank for rank in per_rank if rank], self.config.rollout.val_samples_per_prompt)
        if metrics:
            metrics["timing_s/testing"] = time.perf_counter() - start
        return metrics

    def _save(self, workers: list[Any], done: int) -> Path:
        root = checkpoints.checkpoint_root(self.run_dir)
        partial = checkpoints.begin_checkpoint(root, done)
        ray.get([worker.save_checkpoint.remote(str(partial)) for worker in workers])
        state = {"step": done, "total_steps": self.total_steps, "slots": self.slots, "pipeline": self.config.pipeline}
        folder = checkpoints.commit_checkpoint(partial, state)
        removed = checkpoints.prune_checkpoints(root, self.config.trainer.keep_last)
        logger.info("saved checkpoint %s%s", folder, f" (removed {len(removed)} older)" if removed else "")
        return folder

    def _restore(self, workers: list[Any]) -> int:
        if self.resume_from is None:
            return 0
        state = checkpoints.read_state(self.resume_from)
        if state.get("slots") != self.slots:
            raise TrainerError(
                f"checkpoint {self.resume_from} was written with placement.slots={state.get('slots')}, this run has "
                f"{self.slots}; resume with the same slots or set trainer.resume=never"
            )
        ray.get([worker.load_checkpoint.remote(str(self.resume_from)) for worker in workers])
        logger.info("resumed from %s after %d steps", self.resume_from, state["step"])
        return int(state["step"])


def _close_workers(workers: list[Any]) -> None:
    if not workers:
        return
    try:
        ray.get([worker.close.remote() for worker in workers], timeout=CLOSE_TIMEOUT_S)
    except Exception as error:  # a dead or hung worker must not stop the others from being killed
        logger.warning("closing the workers failed (%s); killing them", error)
    for worker in workers:
        ray.kill(worker)
