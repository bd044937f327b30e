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

from rl_runtime.metrics._batch import count_tokens, sequence_lengths, token_counts
from rl_runtime.metrics._data import compute_data_metrics
from rl_runtime.metrics._errors import MetricsError, MissingExtraError
from rl_runtime.metrics._logger import MetricsLogger
from rl_runtime.metrics._perf import (
    compute_throughput_metrics,
    compute_timing_metrics,
    contiguous_rank_tokens,
    global_seqlen_metrics,
)
from rl_runtime.metrics._reduce import Reduction, reduce_rank_metrics, reduction_for
from rl_runtime.metrics._sink import LOG_SINKS, MetricSink, SinkContext, build_sink, register_sink
from rl_runtime.metrics._sink_console import LoggingConsoleSink, RichConsoleSink, format_metric_line
from rl_runtime.metrics._sink_jsonl import JsonlSink, read_metrics_jsonl
from rl_runtime.metrics._sink_mlflow import MlflowSink
from rl_runtime.metrics._sink_tensorboard import TensorboardSink
from rl_runtime.metrics._sink_wandb import WandbSink
from rl_runtime.metrics._timer import Timer, timed

__all__ = [
    "LOG_SINKS",
    "JsonlSink",
    "LoggingConsoleSink",
    "MetricSink",
    "MetricsError",
    "MetricsLogger",
    "MissingExtraError",
    "MlflowSink",
    "Reduction",
    "RichConsoleSink",
    "SinkContext",
    "TensorboardSink",
    "Timer",
    "WandbSink",
    "build_sink",
    "compute_data_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
    "contiguous_rank_tokens",
    "count_tokens",
    "format_metric_line",
    "global_seqlen_metrics",
    "read_metrics_jsonl",
    "reduce_rank_metrics",
    "reduction_for",
    "register_sink",
    "sequence_lengths",
    "timed",
    "token_counts",
]
