"""The tensorboard sink writes scalars that TensorBoard's own reader gets back."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.metrics import SinkContext
from rl_runtime.metrics._sink import build_sink

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard sink needs the tensorboard package",
)


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    accumulator = event_accumulator.EventAccumulator(str(log_dir))
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }


def test_scalars_read_back(tmp_path: Path) -> None:
    sink = build_sink("tensorboard", SinkContext(run_dir=tmp_path))
    sink.log(1, {"critic/score/mean": 0.5, "timing_s/step": 1.25})
    sink.log(2, {"critic/score/mean": 0.75})
    sink.close()
    scalars = _scalars(tmp_path / "tensorboard")
    assert scalars["critic/score/mean"] == [(1, 0.5), (2, 0.75)]
    assert scalars["timing_s/step"] == [(1, 1.25)]


def test_resume_drops_the_interrupted_steps(tmp_path: Path) -> None:
    first = build_sink("tensorboard", SinkContext(run_dir=tmp_path))
    for step in (1, 2, 3):
        first.log(step, {"x": float(step)})
    first.close()
    resumed = build_sink("tensorboard", SinkContext(run_dir=tmp_path, start_step=2))
    resumed.log(3, {"x": 30.0})
    resumed.close()
    assert _scalars(tmp_path / "tensorboard")["x"] == [(1, 1.0), (2, 2.0), (3, 30.0)]
