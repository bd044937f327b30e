"""The `mlflow` sink: an MLflow run in a file store under `run_dir/mlruns` (or a given tracking URI)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl_runtime.metrics._sink import SINK_EXTRAS, SinkContext, flatten, import_extra, register_sink

_PACKAGE = "mlflow"
_EXTRA = "mlflow"
"""The package this sink imports when built, and the rl-runtime extra that provides it."""
SINK_EXTRAS["mlflow"] = (_PACKAGE, _EXTRA)

logger = logging.getLogger(__name__)

MLFLOW_DIR_NAME = "mlruns"
ALLOW_FILE_STORE_VARIABLE = "MLFLOW_ALLOW_FILE_STORE"
"""MLflow 3 refuses its file store (now in maintenance mode) unless this is true; it is MLflow's own opt-in."""
_FILE_SCHEME = "file:"
MLFLOW_ID_FILE_NAME = "mlflow_run_id"
"""Holds the MLflow run id so a resumed run continues the same run."""
MAX_PARAM_CHARS = 6000
"""MLflow rejects parameter values longer than this; longer ones are cut."""
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
"""MLflow's limits on one `log_batch` call; larger sets go in several calls."""
_MS_PER_S = 1000


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


class MlflowSink:
    """Logs each step's metrics to one MLflow run in a single batch call; closing marks the run finished."""

    def __init__(self, client: Any, run_id: str, metric_type: type) -> None:
        self._client = client
        self.run_id = run_id
        self._metric_type = metric_type

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log `metrics` at `step`."""
        timestamp = int(time.time() * _MS_PER_S)
        batch = [self._metric_type(name, float(value), timestamp, step) for name, value in metrics.items()]
        for chunk in _chunks(batch, MAX_METRICS_PER_BATCH):
            self._client.log_batch(self.run_id, metrics=chunk)

    def close(self) -> None:
        """Mark the run finished."""
        self._client.set_terminated(self.run_id)


def _tracking_uri(context: SinkContext) -> str:
    if context.mlflow_tracking_uri is not None:
        return context.mlflow_tracking_uri
    return (Path(context.run_dir) / MLFLOW_DIR_NAME).resolve().as_uri()


def _start_run(client: Any, entities: Any, context: SinkContext) -> str:
    id_file = Path(context.run_dir) / MLFLOW_ID_FILE_NAME
    if context.start_step > 0 and id_file.is_file():
        run_id = id_file.read_text(encoding="utf-8").strip()
        client.update_run(run_id, status="RUNNING")
        return run_id
    experiment = client.get_experiment_by_name(context.project_name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(context.project_name)
    run_id = str(client.create_run(experiment_id, run_name=context.experiment_name).info.run_id)
    params = [
        entities.Param(key, str(value)[:MAX_PARAM_CHARS]) for key, value in flatten(context.hyperparameters).items()
    ]
    for chunk in _chunks(params, MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    id_file.write_text(run_id, encoding="utf-8")
    return run_id


@register_sink("mlflow")
def mlflow_sink(context: SinkContext) -> MlflowSink:
    """An `MlflowSink` on its own client (no process-global active run); a resumed run continues its run.

    The default file store needs MLflow's opt-in `MLFLOW_ALLOW_FILE_STORE=true`, which this sets in the process
    environment when unset.
    """
    import_extra(_PACKAGE, "mlflow", _EXTRA)  # the distribution first: its submodules may be cached already
    tracking = import_extra("mlflow.tracking", "mlflow", "mlflow")
    entities = import_extra("mlflow.entities", "mlflow", "mlflow")
    context.run_dir.mkdir(parents=True, exist_ok=True)
    uri = _tracking_uri(context)
    if uri.startswith(_FILE_SCHEME) and ALLOW_FILE_STORE_VARIABLE not in os.environ:
        # The file store is the one backend mlflow-skinny supports without a server or SQLAlchemy; MLflow
        # documents this variable as the opt-in, and a user who set it to false keeps MLflow's own error.
        logger.info("setting %s=true to use MLflow's file store at %s", ALLOW_FILE_STORE_VARIABLE, uri)
        os.environ[ALLOW_FILE_STORE_VARIABLE] = "true"
    client = tracking.MlflowClient(tracking_uri=uri)
    return MlflowSink(client, _start_run(client, entities, context), entities.Metric)
