"""MetricsLogger fans out to every sink; a failing sink is disabled once and never costs the others data."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

from rl_core import UnknownNameError
from rl_runtime.metrics import LOG_SINKS, MetricsError, MetricsLogger, SinkContext, read_metrics_jsonl


class RecordingSink:
    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, float]]] = []
        self.closed = False

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.logged.append((step, dict(metrics)))

    def close(self) -> None:
        self.closed = True


class BrokenSink(RecordingSink):
    def __init__(self, fail_log_at: int | None = None, fail_close: bool = False) -> None:
        super().__init__()
        self.fail_log_at = fail_log_at
        self.fail_close = fail_close

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if step == self.fail_log_at:
            raise OSError("disk full")
        super().log(step, metrics)

    def close(self) -> None:
        if self.fail_close:
            raise RuntimeError("cannot flush")
        super().close()


def test_every_sink_gets_every_step_as_floats() -> None:
    first, second = RecordingSink(), RecordingSink()
    with MetricsLogger({"a": first, "b": second}) as logger:
        logger.log(1, {"t": torch.tensor(2.5), "n": np.int64(3), "f": 1, "flag": True})
        assert logger.active == ("a", "b")
    expected = [(1, {"t": 2.5, "n": 3.0, "f": 1.0, "flag": 1.0})]
    assert first.logged == second.logged == expected
    assert all(type(value) is float for value in first.logged[0][1].values())
    assert first.closed and second.closed


def test_a_failing_sink_is_disabled_once_and_the_others_keep_every_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken, healthy = BrokenSink(fail_log_at=2), RecordingSink()
    logger = MetricsLogger({"broken": broken, "healthy": healthy})
    for step in (1, 2, 3):
        logger.log(step, {"x": float(step)})
    logger.close()
    assert [step for step, _ in healthy.logged] == [1, 2, 3]
    assert [step for step, _ in broken.logged] == [1]
    assert logger.disabled == {"broken": "logging step 2 failed: OSError: disk full"}
    assert logger.active == ()
    errors = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert len(errors) == 1
    assert errors[0].getMessage() == "metrics sink 'broken' is disabled: logging step 2 failed: OSError: disk full"
    assert errors[0].exc_info is not None
    assert not broken.closed  # a disabled sink is not called again
    assert healthy.closed


def test_a_sink_failing_to_close_does_not_stop_the_others_closing(caplog: pytest.LogCaptureFixture) -> None:
    broken, healthy = BrokenSink(fail_close=True), RecordingSink()
    logger = MetricsLogger({"broken": broken, "healthy": healthy})
    logger.close()
    assert healthy.closed
    assert logger.disabled == {"broken": "closing failed: RuntimeError: cannot flush"}
    logger.close()  # closing again touches nothing
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


def test_real_jsonl_sink_keeps_data_next_to_a_broken_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LOG_SINKS, "broken", lambda context: BrokenSink(fail_log_at=1))
    with MetricsLogger.from_names(["broken", "jsonl"], SinkContext(run_dir=tmp_path)) as logger:
        logger.log(1, {"x": 1.0})
        logger.log(2, {"x": 2.0})
    assert read_metrics_jsonl(tmp_path / "metrics.jsonl") == {1: {"x": 1.0}, 2: {"x": 2.0}}
    assert "broken" in logger.disabled


def test_from_names_closes_built_sinks_when_a_later_one_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = RecordingSink()
    monkeypatch.setitem(LOG_SINKS, "recording", lambda context: built)
    with pytest.raises(UnknownNameError, match=r"unknown log sink 'tensorbord' \(did you mean 'tensorboard'\?\)"):
        MetricsLogger.from_names(["recording", "tensorbord"], SinkContext(run_dir=tmp_path))
    assert built.closed


def test_from_names_builds_each_name_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[SinkContext] = []
    monkeypatch.setitem(LOG_SINKS, "recording", lambda context: calls.append(context) or RecordingSink())
    logger = MetricsLogger.from_names(["recording", "recording"], SinkContext(run_dir=tmp_path))
    assert logger.active == ("recording",) and len(calls) == 1


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"x": "1.0"}, "metric 'x' must be a number or a one-element tensor, got str"),
        ({"x": torch.ones(2)}, r"metric 'x' must be a scalar, got a tensor of shape \(2,\)"),
    ],
)
def test_non_scalar_values_are_rejected(metrics: dict[str, object], message: str) -> None:
    sink = RecordingSink()
    with pytest.raises(MetricsError, match=message):
        MetricsLogger({"a": sink}).log(1, metrics)
    assert sink.logged == []


@pytest.mark.parametrize("bad", [-1, 1.0, True])
def test_step_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises(MetricsError, match="step must be an int >= 0"):
        MetricsLogger({}).log(bad, {})  # type: ignore[arg-type]
