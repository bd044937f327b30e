"""The coordinator's counters and the estimate of the bytes that cross it."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

METRIC_PUT_SAMPLES = "coordinator/put_samples"
"""Samples put since the coordinator started."""
METRIC_GET_WAIT_S = "coordinator/get_wait_s"
"""Mean seconds a get waited for its step's partition (0 for ranks that found it ready)."""
METRIC_BYTES_THROUGH = "coordinator/bytes_through"
"""Estimated bytes crossing the coordinator per sample: pickled size of what a put sends in plus what a get
sends out (SampleInfo, refs, positions), per sample of each, measured on every BYTES_SAMPLE_EVERY-th call."""

BYTES_SAMPLE_EVERY = 16
"""Pickling a call's infos to size it costs about as much as handling the call, and the size per sample barely
varies between calls, so one call in 16 (the first included) is sized."""
METRIC_SERVED_SAMPLES = "coordinator/served_samples"
"""Samples handed to ranks."""
METRIC_FILTERED_SAMPLES = "coordinator/filtered_samples"
"""Samples dropped by a sample_filter."""
METRIC_DROPPED_SAMPLES = "coordinator/dropped_samples"
"""Samples a step took that some rank never read because the step was dropped (`drop`, `drop_before`)."""
METRIC_PENDING_SAMPLES = "coordinator/pending_samples"
"""Samples put and not yet taken by a step, all edges."""
METRIC_CACHED_STEPS = "coordinator/cached_steps"
"""Steps partitioned or waiting whose ranks have not all read them."""


def estimate_bytes(obj: Any) -> int:
    """Pickled size of `obj`, the estimate of what it costs to send it to or from the actor.

    An ObjectRef pickles to its id only; Ray also ships the owner's address with it, which this leaves out
    (tens of bytes per distinct ref, shared by the samples of one batch).
    """
    return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass
class CoordinatorMetrics:
    """Running totals kept by the coordinator; `as_dict` turns them into the metric names above."""

    put_calls: int = 0
    put_samples: int = 0
    put_bytes: int = 0
    put_sized_samples: int = 0
    served_samples: int = 0
    served_bytes: int = 0
    served_sized_samples: int = 0
    filtered_samples: int = 0
    dropped_samples: int = 0
    get_calls: int = 0
    get_wait_s: float = 0.0

    def count_put(self, samples: int, crossing: Callable[[], Any]) -> None:
        """Count a put of `samples` samples; size what `crossing()` builds (what the call carried, in its wire form)
        when its turn comes, so the other calls do not build it."""
        if self.put_calls % BYTES_SAMPLE_EVERY == 0:
            self.put_bytes += estimate_bytes(crossing())
            self.put_sized_samples += samples
        self.put_calls += 1
        self.put_samples += samples

    def count_get(self, samples: int, waited_s: float, crossing: Any) -> None:
        """Count a served get; size `crossing` (the reply) when its turn comes."""
        if self.get_calls % BYTES_SAMPLE_EVERY == 0:
            self.served_bytes += estimate_bytes(crossing)
            self.served_sized_samples += samples
        self.get_calls += 1
        self.get_wait_s += waited_s
        self.served_samples += samples

    def as_dict(self, pending_samples: int, cached_steps: int) -> dict[str, float]:
        """The metrics by name; per-sample figures are 0 before the first sample."""
        bytes_in = self.put_bytes / self.put_sized_samples if self.put_sized_samples else 0.0
        bytes_out = self.served_bytes / self.served_sized_samples if self.served_sized_samples else 0.0
        return {
            METRIC_PUT_SAMPLES: float(self.put_samples),
            METRIC_SERVED_SAMPLES: float(self.served_samples),
            METRIC_FILTERED_SAMPLES: float(self.filtered_samples),
            METRIC_DROPPED_SAMPLES: float(self.dropped_samples),
            METRIC_GET_WAIT_S: self.get_wait_s / self.get_calls if self.get_calls else 0.0,
            METRIC_BYTES_THROUGH: bytes_in + bytes_out,
            METRIC_PENDING_SAMPLES: float(pending_samples),
            METRIC_CACHED_STEPS: float(cached_steps),
        }
