"""Coordinator metrics from hand-worked totals, and the byte estimate."""

from __future__ import annotations

import pickle

from rl_coordinator import SampleInfo
from rl_coordinator.coordinator import (
    METRIC_BYTES_THROUGH,
    METRIC_CACHED_STEPS,
    METRIC_DROPPED_SAMPLES,
    METRIC_FILTERED_SAMPLES,
    METRIC_GET_WAIT_S,
    METRIC_PENDING_SAMPLES,
    METRIC_PUT_SAMPLES,
    METRIC_SERVED_SAMPLES,
)
from rl_coordinator.coordinator._metrics import BYTES_SAMPLE_EVERY, CoordinatorMetrics, estimate_bytes


def test_as_dict_by_hand() -> None:
    metrics = CoordinatorMetrics(
        put_samples=8,
        put_bytes=400,
        put_sized_samples=8,
        served_samples=4,
        served_bytes=300,
        served_sized_samples=4,
        filtered_samples=2,
        dropped_samples=3,
        get_calls=4,
        get_wait_s=2.0,
    )
    assert metrics.as_dict(pending_samples=2, cached_steps=1) == {
        METRIC_PUT_SAMPLES: 8.0,
        METRIC_SERVED_SAMPLES: 4.0,
        METRIC_FILTERED_SAMPLES: 2.0,
        METRIC_DROPPED_SAMPLES: 3.0,
        METRIC_GET_WAIT_S: 0.5,  # 2 s over 4 gets
        METRIC_BYTES_THROUGH: 125.0,  # 400 / 8 in + 300 / 4 out
        METRIC_PENDING_SAMPLES: 2.0,
        METRIC_CACHED_STEPS: 1.0,
    }


def test_bytes_are_sized_on_one_call_in_sixteen_and_averaged_over_sized_samples() -> None:
    metrics = CoordinatorMetrics()
    small = b"x" * 10

    def not_sized() -> bytes:
        raise AssertionError("a call whose turn it is not was sized")

    for call in range(BYTES_SAMPLE_EVERY + 1):
        metrics.count_put(2, (lambda: small) if call % BYTES_SAMPLE_EVERY == 0 else not_sized)  # calls 0 and 16
    metrics.count_get(4, 0.25, small)
    assert metrics.put_samples == 2 * (BYTES_SAMPLE_EVERY + 1) and metrics.put_sized_samples == 4
    assert metrics.as_dict(0, 0)[METRIC_BYTES_THROUGH] == 2 * estimate_bytes(small) / 4 + estimate_bytes(small) / 4
    assert metrics.get_wait_s == 0.25 and metrics.served_samples == 4


def test_empty_metrics_are_zero() -> None:
    values = CoordinatorMetrics().as_dict(0, 0)
    assert values[METRIC_BYTES_THROUGH] == 0.0 and values[METRIC_GET_WAIT_S] == 0.0


def test_estimate_is_the_pickled_size() -> None:
    infos = [SampleInfo(f"u{i}", 0, 100, 900) for i in range(8)]
    assert estimate_bytes(infos) == len(pickle.dumps(infos, protocol=pickle.HIGHEST_PROTOCOL))
    # A SampleInfo costs well under 100 bytes once the class reference is shared in the pickle.
    assert estimate_bytes(infos) / len(infos) < 100
