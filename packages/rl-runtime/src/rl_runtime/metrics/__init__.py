"""verl's per-step metrics as pure functions, stage timers, cross-rank reduction, and the sinks metrics go to.

    metrics: dict[str, float] = {}
    with timed("step", metrics):
        with timed("gen", metrics):
            ...
    metrics |= compute_data_metrics(batch, max_prompt_length=512, max_response_length=1024)
    prompt_tokens, response_tokens = token_counts(batch)
    metrics |= compute_timing_metrics(metrics, num_prompt_tokens=prompt_tokens, num_response_tokens=response_tokens)
    metrics |= compute_throughput_metrics(
        total_num_tokens=count_tokens(batch), step_seconds=metrics["timing_s/step"], n_gpus=8
    )
    with MetricsLogger.from_names(["console", "jsonl"], SinkContext(run_dir="outputs/run")) as sinks:
        sinks.log(step, reduce_rank_metrics(per_rank_metrics))

Names and definitions follow verl 0.9.1 (`verl/trainer/ppo/metric_utils.py`) so runs compare across frameworks.
The optional sinks import their packages only when built and name the rl-runtime extra that provides them;
importing this package registers every built-in sink in `LOG_SINKS`.
"""

# The built-in sinks register themselves in LOG_SINKS when their modules are imported.
from rl_runtime.metrics import _sink_console, _sink_jsonl, _sink_mlflow, _sink_tensorboard, _sink_wandb  # noqa: F401
from rl_runtime.metrics._errors import MetricsError, MissingExtraError
from rl_runtime.metrics._logger import MetricsLogger
from rl_runtime.metrics._reduce import reduce_rank_metrics
from rl_runtime.metrics._sink import LOG_SINKS, MetricSink, SinkContext, register_sink
from rl_runtime.metrics._sink_jsonl import read_metrics_jsonl

__all__ = [
    "LOG_SINKS",
    "MetricSink",
    "MetricsError",
    "MetricsLogger",
    "MissingExtraError",
    "SinkContext",
    "read_metrics_jsonl",
    "reduce_rank_metrics",
    "register_sink",
]
