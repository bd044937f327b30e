"""The metrics package's public names are pinned, and importing it loads no optional sink package nor ray."""

from __future__ import annotations

import rl_runtime.metrics
from rl_core.testing import modules_loaded_by_import

PUBLIC_API = [
    "LOG_SINKS", "MetricSink", "MetricsError", "MetricsLogger", "MissingExtraError", "SinkContext",
    "missing_sink_extra", "read_metrics_jsonl", "reduce_rank_metrics", "register_sink",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(rl_runtime.metrics.__all__) == sorted(PUBLIC_API)
    for name in PUBLIC_API:
        assert hasattr(rl_runtime.metrics, name), name


def test_import_loads_no_optional_or_heavy_package() -> None:
    # Sinks import their packages when built; the metric functions must work where only torch is installed.
    loaded = {name.split(".")[0] for name in modules_loaded_by_import("rl_runtime.metrics")}
    assert not loaded & {"ray", "rich", "tensorboard", "wandb", "mlflow"}
