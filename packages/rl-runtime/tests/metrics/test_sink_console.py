"""The console sink: a rich progress bar with a metric line per step, or plain log lines without rich."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from rl_runtime.metrics import SinkContext
from rl_runtime.metrics._sink import build_sink
from rl_runtime.metrics._sink_console import LoggingConsoleSink, RichConsoleSink, format_metric_line

STEP_METRICS = {"critic/score/mean": 0.123456, "response_length/mean": 250.0, "other/metric": 1.0}


def test_metric_line_shows_known_metrics_in_order() -> None:
    line = format_metric_line({"timing_s/step": 2.5, **STEP_METRICS})
    assert line == "score=0.1235 resp_len=250 step_s=2.5"


def test_rich_sink_prints_a_line_per_step_and_the_bar(tmp_path: Path) -> None:
    console_module = pytest.importorskip("rich.console", reason="the rich console needs the rich package")
    output = io.StringIO()
    console = console_module.Console(file=output, width=120, force_terminal=False)
    sink = RichConsoleSink(SinkContext(run_dir=tmp_path, experiment_name="demo", total_steps=4, start_step=1), console)
    sink.log(2, STEP_METRICS)
    sink.log(3, STEP_METRICS)
    sink.close()
    text = output.getvalue()
    assert "step 2: score=0.1235 resp_len=250" in text
    assert "step 3: score=0.1235 resp_len=250" in text
    assert "demo" in text and "3/4" in text  # the bar's final state
    assert sink._progress.tasks[0].completed == 3


def test_console_sink_is_rich_when_rich_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("rich.progress", reason="the rich console needs the rich package")
    sink = build_sink("console", SinkContext(run_dir=tmp_path))
    sink.close()
    assert isinstance(sink, RichConsoleSink)


def test_without_rich_it_logs_plain_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    caplog.set_level(logging.INFO, logger="rl_runtime.metrics")
    sink = build_sink("console", SinkContext(run_dir=tmp_path, total_steps=10, start_step=2))
    assert isinstance(sink, LoggingConsoleSink)
    sink.log(3, STEP_METRICS)
    sink.close()
    messages = [record.getMessage() for record in caplog.records]
    assert "rich is not installed; the console sink logs plain lines (pip install 'rl-runtime[rich]')" in messages
    assert any(m.startswith("step 3/10 (ETA 0:00:0") and m.endswith("score=0.1235 resp_len=250") for m in messages)


def test_plain_eta_is_unknown_without_a_total(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rl_runtime.metrics")
    sink = LoggingConsoleSink(SinkContext(run_dir=tmp_path))
    sink.log(1, {})
    assert caplog.records[-1].getMessage() == "step 1/? (ETA ?): "


def test_the_line_shows_the_warm_start_s_loss_and_exact_match() -> None:
    line = format_metric_line({"loss": 1.25, "grad_norm": 3.0, "validation_exact_match": 0.2})
    assert line == "loss=1.25 val_exact_match=0.2"
