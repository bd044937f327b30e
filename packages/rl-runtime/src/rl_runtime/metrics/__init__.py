"""The sinks metrics go to (`LOG_SINKS`, `register_sink`), cross-rank reduction, and reading a run's metrics back.

    with MetricsLogger.from_names(["console", "jsonl"], SinkContext(run_dir="outputs/run")) as sinks:
        sinks.log(step, reduce_rank_metrics(per_rank_metrics))
    by_step = read_metrics_jsonl("outputs/run/metrics.jsonl")

The per-step metrics themselves are pure functions the node operations call (the batch's data metrics in
`rl_core.metrics`; throughput in `_perf`; stage timers in `_timer`); names and definitions follow verl 0.9.1
(`verl/trainer/ppo/metric_utils.py`) so runs compare across frameworks.
The optional sinks import their packages only when built and name the rl-runtime extra that provides them;
importing this package registers every built-in sink in `LOG_SINKS`.
"""

# The built-in sinks register themselves in LOG_SINKS when their modules are imported.
from rl_runtime.metrics import _sink_console, _sink_jsonl, _sink_mlflow, _sink_tensorboard, _sink_wandb  # noqa: F401
from rl_runtime.metrics._errors import MetricsError, MissingExtraError
from rl_runtime.metrics._logger import MetricsLogger
from rl_runtime.metrics._reduce import reduce_rank_metrics
from rl_runtime.metrics._sink import LOG_SINKS, MetricSink, SinkContext, missing_sink_extra, register_sink
from rl_runtime.metrics._sink_jsonl import read_metrics_jsonl

__all__ = [
    "LOG_SINKS",
    "MetricSink",
    "MetricsError",
    "MetricsLogger",
    "MissingExtraError",
    "SinkContext",
    "missing_sink_extra",
    "read_metrics_jsonl",
    "reduce_rank_metrics",
    "register_sink",
]
