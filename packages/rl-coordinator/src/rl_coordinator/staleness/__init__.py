"""Staleness-bounded buffering for asynchronous training: samples older than `max_staleness` are dropped or kept."""

from rl_coordinator.staleness._buffer import (
    METRIC_BUFFERED,
    METRIC_DROPPED,
    METRIC_KEPT,
    METRIC_SERVED,
    METRIC_STALENESS_MEAN,
    BufferEntry,
    StalenessBuffer,
)

__all__ = [
    "METRIC_BUFFERED",
    "METRIC_DROPPED",
    "METRIC_KEPT",
    "METRIC_SERVED",
    "METRIC_STALENESS_MEAN",
    "BufferEntry",
    "StalenessBuffer",
]
