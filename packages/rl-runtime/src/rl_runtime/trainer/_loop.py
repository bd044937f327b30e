"""`Trainer`: the run's driver. Plans the pipeline on the slots, starts one DAG worker per slot (or, launched by
torchrun, this rank's worker), runs the steps, validates, checkpoints and resumes. Only metrics and control calls
pass through it, never samples."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import attrs
import yaml

from rl_core.graph import TaskGraph, get_pipeline
from rl_engines.reward_model import check_reward_model
from rl_runtime.config import BatchPlan, RunConfig
from rl_runtime.config._converter import unstructure
from rl_runtime.config._schema import is_pipeline_file
from rl_runtime.config._schema_algorithm_batch import kl_in_reward
from rl_runtime.config._schema_sections import RESUME_AUTO, RESUME_NEVER
from rl_runtime.metrics import MetricsLogger, SinkContext
from rl_runtime.nodes import TaskFactory
from rl_runtime.nodes._rebalance import with_rebalance
from rl_runtime.trainer import _checkpoints as checkpoints
from rl_runtime.trainer._data import open_files, steps_per_epoch
from rl_runtime.trainer._embodied import check_embodied_run
from rl_runtime.trainer._engines import actor_hf_config
from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._judge import judge_tokenizer_folder
from rl_runtime.trainer._launch import resolve_launch
from rl_runtime.trainer._session import TrainingSession
from rl_runtime.trainer._split import plan_placement, rollout_subgraph, train_subgraph
from rl_runtime.trainer._stop import StopOnSignal, stopped
from rl_runtime.trainer._worker_state import ExtrasFactory

logger = logging.getLogger(__name__)


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


def load_pipeline(pipeline: str, *, kl_in_reward: bool = False) -> TaskGraph:
    """The built-in pipeline `pipeline` (with `kl_in_reward`, its variant that computes the old and reference
    log-probs before the advantages, `rl_core.graph.KL_IN_REWARD_PIPELINES`), or the TaskGraph described by a
    pipeline YAML file (run as written: the config refuses `kl.mode=in_reward` with one that cannot run it)."""
    if not is_pipeline_file(pipeline):
        return get_pipeline(pipeline, kl_in_reward=kl_in_reward)
    path = Path(pipeline)
    if not path.is_file():
        raise TrainerError(f"pipeline: {pipeline!r} is not a file; give a pipeline YAML or a built-in name")
    return TaskGraph.from_dict(yaml.safe_load(path.read_text()))


class Trainer:
    """Runs a RunConfig with the task `task_factory` builds in each worker.

    Colocated (`placement.colocate=true`): every slot runs the whole pipeline (rollout, reference, actor, critic)
    on its share of the data, and the training roles shard over all slots with FSDP2. Split
    (`placement.colocate=false`): the rollout part of the pipeline runs on some slots and the training part on the
    others (`split_pipeline`, `plan_placement`); samples cross through the DataCoordinator and each actor update's
    weights go to the rollout slots before the next step samples.

    `extras_factory`, called in each worker with its `WorkerAssignment`, builds what operations of your own read
    as `ctx.resources.extras` (a reward model, a tool server); None leaves it empty.
    """

    def __init__(
        self, config: RunConfig, task_factory: TaskFactory, *, extras_factory: ExtrasFactory | None = None
    ) -> None:
        if config.rollout.temperature == 0:
            raise TrainerError("rollout.temperature=0 samples greedily, which RL training cannot learn from; use > 0")
        self.config = config
        self.launch = resolve_launch(config)
        """Ray (this process drives every slot) or torchrun (this process is one slot); see `trainer.launcher`."""
        self.task_factory = task_factory
        self.extras_factory = extras_factory
        self.slots = config.placement.slots
        graph = load_pipeline(config.pipeline, kl_in_reward=kl_in_reward(config))
        self.graph = with_rebalance(graph, config.batch.balance_across_ranks)
        self.placement = plan_placement(config, self.graph)
        rollout_dp = len(rollout_subgraph(self.placement).ranks)
        train_dp = len(train_subgraph(self.placement).ranks)
        self.plan = BatchPlan.from_config(config, rollout_dp=rollout_dp, train_dp=train_dp)
        servers = config.rollout.servers
        if servers and len(servers) < rollout_dp:
            raise TrainerError(
                f"rollout.servers: expected at least one address per rollout slot ({rollout_dp} under this placement), "
                f"found {len(servers)}; add servers, or leave rollout.servers empty to start one on each slot"
            )
        if config.env is not None:
            check_embodied_run(config, actor_hf_config(config))
        if config.reward_model is not None:  # a missing folder or another vocabulary stops the run here
            check_reward_model(config.reward_model, config.actor.model)
        if config.judge is not None:
            judge_tokenizer_folder(config.judge, config.actor.model)
        train_rows = len(open_files(config.data.train_files, "data.train_files"))
        if config.data.val_files:  # opened here too, so a missing file stops the run before any worker starts
            open_files(config.data.val_files, "data.val_files")
        self.steps_per_epoch = steps_per_epoch(train_rows, self.plan)
        self.total_steps = config.trainer.total_steps or config.trainer.total_epochs * self.steps_per_epoch
        self.run_dir = Path(config.trainer.output_dir)
        self.resume_from = self._resume_folder()

    def _resume_folder(self) -> Path | None:
        resume = self.config.trainer.resume
        if resume == RESUME_NEVER:
            return None
        if resume == RESUME_AUTO:
            folder = checkpoints.newest_verified_checkpoint(checkpoints.checkpoint_root(self.run_dir))
        else:
            folder = Path(resume)
            checkpoints.verify_checkpoint(folder)
        if folder is not None:
            self._check_checkpoint(folder)
        return folder

    def _check_checkpoint(self, folder: Path) -> None:
        """Refuse a checkpoint whose ranks hold other engines or data shards than this run's would."""
        state = checkpoints.read_state(folder)
        if state.get("slots") != self.slots:
            raise TrainerError(
                f"checkpoint {folder} was written with placement.slots={state.get('slots')}, this run has "
                f"{self.slots}; resume with the same slots or set trainer.resume=never"
            )
        colocate = self.config.placement.colocate
        if state.get(checkpoints.COLOCATE_KEY, True) != colocate:  # checkpoints from before split were colocated
            raise TrainerError(
                f"checkpoint {folder} was written with placement.colocate={str(not colocate).lower()}, this run has "
                f"{str(colocate).lower()}: its ranks hold other engines and data shards; resume with the same "
                "placement.colocate or set trainer.resume=never"
            )

    def _validates_after(self, done: int) -> bool:
        every = self.config.trainer.validate_every
        return bool(every and done % every == 0 and self.config.data.val_files)

    def _steps_in_next_call(self, next_step: int) -> int:
        """`trainer.steps_per_call`, cut short at the next validation, checkpoint or the end."""
        trainer = self.config.trainer
        count = min(trainer.steps_per_call, self.total_steps - next_step)
        for every in (trainer.validate_every, trainer.checkpoint_every):
            if every:
                count = min(count, every - next_step % every)
        return count

    def _next_horizon(self, next_step: int) -> int:
        """The first step after `next_step` at which a validation, a checkpoint or the end needs nothing in flight."""
        trainer = self.config.trainer
        horizon = self.total_steps
        for every in (trainer.validate_every, trainer.checkpoint_every):
            if every:
                horizon = min(horizon, next_step + every - next_step % every)
        return horizon

    def session(self) -> TrainingSession:
        """Start the workers (restoring the resume checkpoint) for step-by-step control; use it as a context manager."""
        return TrainingSession(self)

    def fit(self) -> TrainResult:
        """Train to `total_steps` (resuming first when asked); returns the metrics of the steps run here.

        SIGINT or SIGTERM stops it cleanly (`StopOnSignal`): the current step finishes, a checkpoint is saved and
        `TrainingInterrupted` says where; a second signal abandons the step (the newest checkpoint stays)."""
        trainer = self.config.trainer
        with StopOnSignal() as stop, self.session() as run:
            context = SinkContext(
                run_dir=self.run_dir,
                project_name=trainer.project_name,
                experiment_name=trainer.experiment_name,
                total_steps=self.total_steps,
                start_step=run.start_step,
                hyperparameters=unstructure(self.config),
            )
            history: list[dict[str, float]] = []
            validations: list[tuple[int, dict[str, float]]] = []
            last_checkpoint = self.resume_from
            saved_step = run.start_step if self.resume_from is not None else None
            sink_names = trainer.log_sinks if run.is_leader else ()  # under torchrun rank 0 logs every rank's step
            with MetricsLogger.from_names(sink_names, context) as sinks:
                try:
                    if trainer.validate_before_train and run.start_step == 0 and self.config.data.val_files:
                        validations.append((0, run.validate()))
                        sinks.log(0, validations[-1][1])
                    while run.next_step < self.total_steps and stop.signal_number is None:
                        chunk = run.steps(
                            self._steps_in_next_call(run.next_step), horizon=self._next_horizon(run.next_step)
                        )
                        for offset, metrics in enumerate(chunk):
                            done = run.next_step - len(chunk) + offset + 1
                            if offset == len(chunk) - 1 and self._validates_after(done):
                                validations.append((done, run.validate()))
                                metrics.update(validations[-1][1])
                            sinks.log(done, metrics)
                            history.append(metrics)
                        every = trainer.checkpoint_every
                        if (every and run.next_step % every == 0) or run.next_step == self.total_steps:
                            last_checkpoint, saved_step = run.save(), run.next_step
                    if stop.signal_number is not None and run.next_step < self.total_steps:
                        # Asynchronous training: the steps whose samples exist run before the checkpoint.
                        for metrics in run.drain():
                            sinks.log(run.next_step, metrics)
                            history.append(metrics)
                        if saved_step != run.next_step and run.next_step > 0:
                            last_checkpoint, saved_step = run.save(), run.next_step
                        raise stopped(
                            stop.signal_number, run.next_step, self.total_steps, last_checkpoint, abandoned=False
                        )
                except KeyboardInterrupt:
                    newest = checkpoints.latest_checkpoint(checkpoints.checkpoint_root(self.run_dir))
                    number = stop.signal_number or signal.SIGINT
                    raise stopped(number, run.next_step, self.total_steps, newest, abandoned=True) from None
            return TrainResult(
                self.run_dir, run.start_step, self.total_steps, tuple(history), tuple(validations), last_checkpoint
            )
