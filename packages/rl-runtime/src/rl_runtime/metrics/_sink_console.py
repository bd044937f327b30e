"""The `console` sink: a rich progress bar with ETA and one compact metric line per step, or log lines."""

from __future__ import annotations

import datetime
import importlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from rl_runtime.metrics._sink import SinkContext, register_sink

logger = logging.getLogger(__name__)

CONSOLE_METRICS: Mapping[str, str] = {
    "critic/score/mean": "score",
    "critic/rewards/mean": "reward",
    "response_length/mean": "resp_len",
    "actor/pg_loss": "pg_loss",
    "actor/ppo_kl": "kl",
    "actor/entropy": "entropy",
    "actor/grad_norm": "grad_norm",
    "critic/vf_loss": "vf_loss",
    "perf/throughput": "tok/s/gpu",
    "timing_s/step": "step_s",
    "loss": "loss",
    "validation_exact_match": "val_exact_match",
    "heldout_exact_match": "heldout_exact_match",
}
"""The metrics the compact line shows, in order, with their short labels; others go to the file sinks only. The
last three are the supervised warm start's (rl-recipes' SFT), which logs through the same sinks."""
_SIGNIFICANT_DIGITS = 4


def format_metric_line(metrics: Mapping[str, float]) -> str:
    """The compact one-line summary of a step: `score=0.5 resp_len=123 ...` for the `CONSOLE_METRICS` present."""
    return " ".join(
        f"{label}={metrics[name]:.{_SIGNIFICANT_DIGITS}g}" for name, label in CONSOLE_METRICS.items() if name in metrics
    )


class RichConsoleSink:
    """A rich progress bar over the run's steps (with ETA when the total is known) and a metric line per step."""

    def __init__(self, context: SinkContext, console: Any = None) -> None:
        progress_module = importlib.import_module("rich.progress")
        self._progress = progress_module.Progress(
            progress_module.TextColumn("[bold]{task.description}"),
            progress_module.BarColumn(),
            progress_module.MofNCompleteColumn(),
            progress_module.TimeElapsedColumn(),
            progress_module.TextColumn("ETA"),
            progress_module.TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            context.experiment_name, total=context.total_steps, completed=context.start_step
        )
        self._progress.start()

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Print the step's metric line above the bar and move the bar to `step`."""
        self._progress.console.print(f"step {step}: {format_metric_line(metrics)}", markup=False, highlight=False)
        self._progress.update(self._task, completed=step)

    def close(self) -> None:
        """Stop the bar, leaving its last state on screen."""
        self._progress.stop()


class LoggingConsoleSink:
    """Without rich: one INFO log record per step with progress, ETA and the metric line."""

    def __init__(self, context: SinkContext) -> None:
        self._total = context.total_steps
        self._first_step = context.start_step
        self._started = time.monotonic()

    def _eta(self, step: int) -> str:
        done = step - self._first_step
        if self._total is None or done <= 0:
            return "?"
        per_step = (time.monotonic() - self._started) / done
        return str(datetime.timedelta(seconds=round(per_step * max(self._total - step, 0))))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log the step's progress, ETA and metric line."""
        total = "?" if self._total is None else self._total
        logger.info("step %d/%s (ETA %s): %s", step, total, self._eta(step), format_metric_line(metrics))

    def close(self) -> None:
        """Nothing to release."""


@register_sink("console")
def console_sink(context: SinkContext) -> RichConsoleSink | LoggingConsoleSink:
    """A `RichConsoleSink` when rich is installed, else a `LoggingConsoleSink`."""
    try:
        importlib.import_module("rich.progress")
    except ImportError:
        logger.info("rich is not installed; the console sink logs plain lines (pip install 'rl-runtime[rich]')")
        return LoggingConsoleSink(context)
    return RichConsoleSink(context)
