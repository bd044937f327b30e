"""`run_sft`: the supervised warm start on the training engine, with per-step metrics and an HF export.

`run_sft` is three calls (the SFT recipe, `rl_recipes.recipes.sft.run`, spells them out): `load_sft_data`,
`build_sft_engine`, then `train_sft`, the loop with periodic validation, the export and the held-out score."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attrs

from rl_engines.training import (
    FSDPEngine,
    MicroBatchConfig,
    OptimizerConfig,
    ScheduleConfig,
    TrainEngineConfig,
)
from rl_recipes.sft._config import SFTConfig
from rl_recipes.sft._data import RowOrder, SFTExample, collate
from rl_recipes.sft._errors import SFTError
from rl_recipes.sft._export import MODEL_DIR, export_model_folder
from rl_recipes.sft._heldout import TrainingScorer, share_from_rank_zero
from rl_recipes.sft._loss import LOG_PROBS_ONLY, response_nll_loss
from rl_recipes.sft._setup import SFTData, load_sft_data
from rl_recipes.sft._sources import model_source
from rl_recipes.tasks import MathSample
from rl_runtime.metrics import MetricsLogger, SinkContext

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
"""One JSON object per line in `output_dir` (the `jsonl` sink's file): a training step (`loss`, ...) or an
evaluation (`validation_exact_match` or `heldout_exact_match`)."""
EXPERIMENT_NAME = "sft"
"""The run's name in the progress bar and the tracking sinks."""
HELDOUT_METRIC = "heldout_exact_match"
VALIDATION_METRIC = "validation_exact_match"
_LOG_EVERY = 10
"""Steps between INFO log lines (every step goes to the metrics sinks and the `on_step` callback)."""
_NOT_LOGGED = ("step", "total_steps")
"""`SFTStep` fields that are not metrics (the step is the record's own key)."""


@dataclass(frozen=True)
class SFTStep:
    """What one optimizer step did."""

    step: int
    total_steps: int
    loss: float
    """The step's token-mean NLL of the response tokens, over all ranks."""
    grad_norm: float
    lr: float
    tokens: int
    """Response tokens in the step over all ranks."""
    seconds: float


@dataclass(frozen=True)
class SFTResult:
    """The outcome of `run_sft`."""

    model_dir: Path
    """The exported Hugging Face folder (weights, config, tokenizer, generation config)."""
    metrics_file: Path
    steps: int
    """Optimizer steps run (fewer than configured when the run stopped early)."""
    stopped_early: bool
    """Whether a periodic evaluation reached `stop_at_exact_match`."""
    losses: tuple[float, ...]
    """Loss of every step, in order."""
    heldout_exact_match: float | None
    """Greedy exact match on the held-out rows after the last step; None without held-out rows."""
    eval_curve: tuple[tuple[int, float], ...]
    """`(step, exact match)` of every periodic evaluation, on the validation rows (the held-out rows when
    there are none)."""
    train_seconds: float
    """Wall time of the optimizer steps alone (no start-up, evaluation or export)."""


def _engine_config(config: SFTConfig, tokenizer: Any, total_steps: int) -> TrainEngineConfig:
    schedule = ScheduleConfig(
        kind=config.lr_schedule,
        warmup_steps=min(config.warmup_steps, total_steps - 1),
        total_steps=total_steps,
    )
    return TrainEngineConfig(
        model=model_source(config, tokenizer),
        optimizer=OptimizerConfig(lr=config.lr, weight_decay=config.weight_decay),
        schedule=schedule,
        micro_batch=MicroBatchConfig(
            max_tokens_per_micro_batch=config.max_tokens_per_micro_batch, packing=config.packing
        ),
        device="auto",
    )


def _step_batch(examples: list[SFTExample], rows: list[int], engine: FSDPEngine, pad_token_id: int) -> dict[str, Any]:
    """This rank's share of the step's rows as a batch; the engine plans its micro-batches under its budget."""
    mine = [examples[i] for i in rows[engine.rank :: engine.world_size]]
    return collate(mine, pad_token_id)


def _metrics_logger(config: SFTConfig, total_steps: int, rank: int) -> MetricsLogger:
    """RL's metrics logger over `config.log_sinks` on rank 0 (no sinks elsewhere); a fresh `metrics.jsonl`."""
    if rank != 0:
        return MetricsLogger({})
    run_dir = Path(config.output_dir)
    (run_dir / METRICS_FILE).unlink(missing_ok=True)  # a warm start never resumes: its file starts empty
    context = SinkContext(
        run_dir=run_dir,
        experiment_name=EXPERIMENT_NAME,
        total_steps=total_steps,
        hyperparameters=attrs.asdict(config),
    )
    return MetricsLogger.from_names(config.log_sinks, context)


class _Run:
    """The moving parts of one warm start: the engine, the row order, the metrics log and the scorer."""

    def __init__(
        self, config: SFTConfig, engine: FSDPEngine, tokenizer: Any, examples: list[SFTExample], total_steps: int
    ) -> None:
        self.config = config
        self.engine = engine
        self.examples = examples
        self.total_steps = total_steps
        self.order = RowOrder(len(examples), config.seed)
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.metrics = _metrics_logger(config, total_steps, engine.rank)
        self.scorer: TrainingScorer | None = None
        self.curve: list[tuple[int, float]] = []

    def score(self, step: int, samples: list[MathSample], metric: str) -> float | None:
        """Exact match of the current weights on `samples` (the same value on every rank), logged as `metric`."""
        if self.scorer is None or not samples:
            return None
        result = self.scorer.score(step, samples)
        if result is not None:
            self.metrics.log(step, {metric: result.mean_reward, "eval_seconds": result.seconds})
            logger.info("step %d: %s %.4f", step, metric, result.mean_reward)
        return share_from_rank_zero(None if result is None else result.mean_reward)

    def train_step(self, step: int) -> SFTStep:
        """One optimizer step on the next `batch_size` rows, recorded in the metrics log."""
        started = time.perf_counter()
        rows = self.order.take(self.config.batch_size)
        batch = _step_batch(self.examples, rows, self.engine, self.pad_token_id)
        result = self.engine.train_step(batch, response_nll_loss, LOG_PROBS_ONLY)
        self.engine.step_lr_scheduler()
        seconds = time.perf_counter() - started
        record = SFTStep(
            step, self.total_steps, result.loss, result.grad_norm, result.lr, int(result.normalizer.num_tokens), seconds
        )
        self.metrics.log(step, {k: v for k, v in dataclasses.asdict(record).items() if k not in _NOT_LOGGED})
        if step % _LOG_EVERY == 0 or step == self.total_steps:
            logger.info(
                "step %d/%d: loss %.4f, lr %.2e, %.3f s", step, self.total_steps, result.loss, result.lr, seconds
            )
        return record

    def close(self) -> None:
        self.metrics.close()
        if self.scorer is not None:
            self.scorer.close()


def build_sft_engine(config: SFTConfig, data: SFTData) -> FSDPEngine:
    """The training engine of `config` over the process group (if any), scheduled for `data`'s step count; a
    `batch_size` that does not divide over the ranks is refused."""
    engine = FSDPEngine.from_config(_engine_config(config, data.tokenizer, data.total_steps(config)))
    if config.batch_size % engine.world_size:
        raise SFTError(
            f"SFTConfig.batch_size={config.batch_size} does not divide over {engine.world_size} ranks; "
            f"use a multiple of {engine.world_size}"
        )
    return engine


def train_sft(
    config: SFTConfig, engine: FSDPEngine, data: SFTData, *, on_step: Callable[[SFTStep], None] | None = None
) -> SFTResult:
    """Train `engine` on `data`'s rows, export it to `<output_dir>/model` and score the held-out rows.

    Every `eval_every` steps (and at step 0) the validation rows (the held-out rows when there are none)
    are scored; the run stops early once that reaches `stop_at_exact_match`. `on_step` is called after every
    step (on every rank), e.g. to drive a progress bar.
    """
    tokenizer, examples, validation, heldout = data.tokenizer, data.examples, data.validation, data.heldout
    total_steps = data.total_steps(config)
    periodic, periodic_metric = (validation, VALIDATION_METRIC) if validation else (heldout, HELDOUT_METRIC)
    logger.info(
        "SFT: %d rows, up to %d steps of %d rows on %d rank(s), %d validation and %d held-out rows",
        len(examples),
        total_steps,
        config.batch_size,
        engine.world_size,
        len(validation),
        len(heldout),
    )
    run = _Run(config, engine, tokenizer, examples, total_steps)
    losses: list[float] = []
    seconds: list[float] = []
    stopped_early = False
    try:
        if heldout or validation:
            run.scorer = TrainingScorer(engine, tokenizer, max_new_tokens=config.eval_max_new_tokens, seed=config.seed)
        step = 0
        while step < total_steps:
            if config.eval_every and step % config.eval_every == 0:
                accuracy = run.score(step, periodic, periodic_metric)
                if accuracy is not None:
                    run.curve.append((step, accuracy))
                    stopped_early = config.stop_at_exact_match is not None and accuracy >= config.stop_at_exact_match
                if stopped_early:
                    logger.info(
                        "stopping early at step %d: %s %.4f >= %s",
                        step,
                        periodic_metric,
                        accuracy,
                        config.stop_at_exact_match,
                    )
                    break
            step += 1
            record = run.train_step(step)
            losses.append(record.loss)
            seconds.append(record.seconds)
            if on_step is not None:
                on_step(record)
        model_dir = export_model_folder(engine, tokenizer, Path(config.output_dir) / MODEL_DIR)
        final = run.score(step, heldout, HELDOUT_METRIC)
        if config.eval_every and not stopped_early and (not run.curve or run.curve[-1][0] != step):
            last = final if periodic is heldout else run.score(step, periodic, periodic_metric)
            if last is not None:
                run.curve.append((step, last))
    finally:
        run.close()
    return SFTResult(
        model_dir=model_dir,
        metrics_file=Path(config.output_dir) / METRICS_FILE,
        steps=step,
        stopped_early=stopped_early,
        losses=tuple(losses),
        heldout_exact_match=final,
        eval_curve=tuple(run.curve),
        train_seconds=sum(seconds),
    )


def run_sft(config: SFTConfig, *, on_step: Callable[[SFTStep], None] | None = None) -> SFTResult:
    """Train `config.model` on prompt + response + eos with the loss on the response tokens, export it, and
    score the held-out rows (see `train_sft`).

    Runs in one process or on every rank of an initialised process group (each rank takes its share of every
    step's `batch_size` rows). Every input is checked before the first step.
    """
    data = load_sft_data(config)
    engine = build_sft_engine(config, data)
    return train_sft(config, engine, data, on_step=on_step)
