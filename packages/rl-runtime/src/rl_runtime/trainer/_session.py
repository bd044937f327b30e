"""`TrainingSession`: a Trainer's workers, started and restored, driven one step (or validation, or save) at a time.

with Trainer(config, task_factory).session() as run:
    while run.next_step < trainer.total_steps:
        metrics = run.step()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from rl_runtime.config._schema_async import describe_policy_loss, stale_loss_warning
from rl_runtime.metrics._perf import compute_throughput_metrics
from rl_runtime.trainer import _checkpoints as checkpoints
from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._launch import Launch
from rl_runtime.trainer._lock import acquire_run_lock, release_run_lock
from rl_runtime.trainer._spmd_slots import SPMDSlots
from rl_runtime.trainer._validation import reduce_validation
from rl_runtime.workers import StepResult

if TYPE_CHECKING:
    from rl_runtime.trainer._loop import Trainer

logger = logging.getLogger(__name__)

DRIVER_BYTES_METRIC = "perf/driver_received_bytes"
"""What the driver received this step (pickled metric dicts): evidence that no sample passed through it."""


class Slots(Protocol):
    """A Trainer's running slots, however launched (`RaySlots`: Ray actors; `SPMDSlots`: this torchrun rank)."""

    is_leader: bool
    """Whether this process writes the run folder's shared files (sinks, checkpoint commits)."""

    def start(self) -> None: ...

    @property
    def in_flight(self) -> int:
        """Rollout steps run ahead of training (asynchronous training; 0 otherwise)."""
        ...

    def run_steps(self, steps: Sequence[int], horizon: int | None = None) -> list[StepResult]: ...

    def drain(self, next_step: int) -> list[StepResult]: ...

    def evaluate(self, step: int) -> list[dict[str, float]]: ...

    def save_checkpoint(self, path: str) -> None: ...

    def load_checkpoint(self, path: str) -> None: ...

    def barrier(self) -> None: ...

    def close(self, *, abandon: bool = False) -> None: ...


def make_slots(trainer: Trainer, launch: Launch) -> Slots:
    """The slots of `trainer` for `launch`: this rank's under torchrun, Ray workers otherwise (Ray imported only
    then: a torchrun rank runs without it)."""
    if launch.spmd:
        return SPMDSlots(trainer, launch)
    from rl_runtime.trainer._ray_slots import RaySlots

    return RaySlots(trainer)


class TrainingSession:
    """The running workers of one Trainer. Entering starts them (Ray actors, or this torchrun rank's worker) and
    restores the resume checkpoint; leaving closes them. Every rank of a torchrun job runs its own session."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.config = trainer.config
        self.start_step = 0
        self.next_step = 0
        self.slots = make_slots(trainer, trainer.launch)
        self._started = False
        self._locked = False

    @property
    def is_leader(self) -> bool:
        """Whether this process writes the run's metrics and commits its checkpoints."""
        return self.slots.is_leader

    def __enter__(self) -> TrainingSession:
        acquire_run_lock(self.trainer.run_dir, take_over=self.config.trainer.take_over)
        self._locked = True
        try:
            logger.info("pipeline %s: %s", self.config.pipeline, self.trainer.graph.description)
            logger.info("placement:\n%s", self.trainer.placement.describe())
            logger.info("batch plan:\n%s", self.trainer.plan.describe())
            logger.info("%s", describe_policy_loss(self.config))
            if (warning := stale_loss_warning(self.config)) is not None:
                logger.warning("%s", warning)
            self.slots.start()
            self._started = True
            self.start_step = self.next_step = self._restore()
        except BaseException:
            self.close(abandon=self.trainer.launch.spmd)  # a torchrun rank must not wait for ranks that may not come
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        abandoned = isinstance(error, KeyboardInterrupt) or getattr(error, "abandoned", False)
        self.close(abandon=abandoned or (error is not None and self.trainer.launch.spmd))

    def step(self) -> dict[str, float]:
        """Run training step `next_step` on every worker; its metrics, with throughput and timing added."""
        return self.steps(1)[0]

    def steps(self, count: int, *, horizon: int | None = None) -> list[dict[str, float]]:
        """Run the next `count` training steps, one call per worker; each step's metrics, in order.

        Timing and throughput of each step are the call's wall time shared evenly over its steps. In asynchronous
        training (`algorithm.max_staleness` > 0, split placement) the rollout slots run ahead up to, not past,
        `horizon` (the next step that needs the pipeline drained: a validation, a checkpoint or the end; default
        the step after these `count`)."""
        assert self._started, "use the session as a context manager"
        start = time.perf_counter()
        results = self.slots.run_steps(range(self.next_step, self.next_step + count), horizon)
        return self._step_metrics(results, (time.perf_counter() - start) / count)

    def drain(self) -> list[dict[str, float]]:
        """Asynchronous training: run the training steps whose samples the rollout slots already made, so that
        nothing is in flight (before a checkpoint on a stop); their metrics (none when synchronous or drained)."""
        if self.slots.in_flight == 0:
            return []
        start = time.perf_counter()
        results = self.slots.drain(self.next_step)
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
        if self.slots.in_flight:
            raise TrainerError(
                f"cannot {action} with {self.slots.in_flight} asynchronous rollout step(s) in flight after step "
                f"{self.next_step}: pass the step as the horizon of `steps`, or call `drain` first"
            )

    def validate(self) -> dict[str, float]:
        """Validation metrics of the current policy over the held-out files (empty without them)."""
        self._require_drained("validate")
        start = time.perf_counter()
        per_rank = self.slots.evaluate(self.next_step)
        k = self.config.rollout.val_samples_per_prompt
        metrics = reduce_validation([rank for rank in per_rank if rank], k)
        if metrics:
            metrics["timing_s/testing"] = time.perf_counter() - start
        return metrics

    def save(self) -> Path:
        """Commit a checkpoint of the steps done so far; prune to `trainer.keep_last`. Under torchrun every rank
        writes its part and the leader commits; every rank returns the committed folder."""
        self._require_drained("save a checkpoint")
        done, start = self.next_step, time.perf_counter()
        root = checkpoints.checkpoint_root(self.trainer.run_dir)
        partial = checkpoints.begin_checkpoint(root, done) if self.is_leader else checkpoints.partial_folder(root, done)
        self.slots.barrier()  # the leader made the empty folder
        self.slots.save_checkpoint(str(partial))
        folder = checkpoints.committed_folder(partial)
        if self.is_leader:
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
        self.slots.barrier()  # no rank goes on before the checkpoint is committed
        return folder

    def _restore(self) -> int:
        folder = self.trainer.resume_from
        if folder is None:
            return 0
        state = checkpoints.read_state(folder)
        self.slots.load_checkpoint(str(folder))
        logger.info("resumed from %s after %d steps", folder, state["step"])
        return int(state["step"])

    def close(self, *, abandon: bool = False) -> None:
        """Close the slots (`RaySlots.close`, `SPMDSlots.close`), then release the run folder; `abandon` kills Ray
        workers at once (a step abandoned by a second Ctrl-C would otherwise finish before they close) and makes a
        torchrun rank leave without waiting for the others."""
        self.slots.close(abandon=abandon)
        self._started = False
        if self._locked:  # last: no worker of ours can write into the folder any more
            release_run_lock(self.trainer.run_dir)
            self._locked = False
