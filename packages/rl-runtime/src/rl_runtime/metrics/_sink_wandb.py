"""The `wandb` sink: a Weights & Biases run under `run_dir/wandb`, offline by default (no network needed)."""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl_runtime.metrics._sink import SINK_EXTRAS, SinkContext, import_extra, register_sink

_PACKAGE = "wandb"
_EXTRA = "wandb"
"""The package this sink imports when built, and the rl-runtime extra that provides it."""
SINK_EXTRAS["wandb"] = (_PACKAGE, _EXTRA)

WANDB_ID_FILE_NAME = "wandb_run_id"
"""Holds the run's wandb id so a resumed run continues the same wandb run."""
_ID_ALPHABET = string.ascii_lowercase + string.digits
_ID_LENGTH = 8
"""wandb's own run ids: 8 characters of [a-z0-9], valid in URLs and folder names."""


class WandbSink:
    """Logs each step's metrics to one wandb run at that step; closing finishes the run."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log `metrics` at `step`."""
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        """Finish the run. wandb's service process may still be writing the offline file when this returns;
        wandb waits for it at interpreter exit."""
        self._run.finish()


def _run_id(context: SinkContext) -> str:
    path = Path(context.run_dir) / WANDB_ID_FILE_NAME
    if context.start_step > 0 and path.is_file():
        return path.read_text(encoding="utf-8").strip()
    run_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))
    path.write_text(run_id, encoding="utf-8")
    return run_id


@register_sink("wandb")
def wandb_sink(context: SinkContext) -> WandbSink:
    """A `WandbSink` in `context.wandb_mode`; a resumed run continues the wandb run of its first start."""
    wandb = import_extra(_PACKAGE, "wandb", _EXTRA)
    context.run_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=context.project_name,
        name=context.experiment_name,
        id=_run_id(context),
        resume="allow",
        dir=str(context.run_dir),
        mode=context.wandb_mode,
        config=dict(context.hyperparameters),
        # A run of its own, not wandb's process-global one, so several loggers in one process stay apart.
        reinit="create_new",
        # Capturing the console would wrap the progress bar; our own console sink shows the metrics.
        settings=wandb.Settings(console="off", silent=True),
    )
    return WandbSink(run)
