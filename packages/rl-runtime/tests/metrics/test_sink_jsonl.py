"""The jsonl sink writes one parseable object per step, appends on resume and survives a torn last line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rl_runtime.metrics import SinkContext, read_metrics_jsonl
from rl_runtime.metrics._sink import build_sink


def test_one_json_object_per_step(tmp_path: Path) -> None:
    sink = build_sink("jsonl", SinkContext(run_dir=tmp_path / "run"))
    sink.log(1, {"critic/score/mean": 0.5, "timing_s/step": 1.25})
    # Flushed at once: readable before close.
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"step": 1, "critic/score/mean": 0.5, "timing_s/step": 1.25}]
    sink.log(2, {"critic/score/mean": math.nan})
    sink.close()
    sink.close()  # harmless
    records = read_metrics_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert records[1] == {"critic/score/mean": 0.5, "timing_s/step": 1.25}
    assert math.isnan(records[2]["critic/score/mean"])


def test_resume_cuts_the_replayed_steps_and_appends_each_step_once(tmp_path: Path) -> None:
    first = build_sink("jsonl", SinkContext(run_dir=tmp_path))
    for step in (1, 2, 3):
        first.log(step, {"x": float(step)})
    first.close()
    resumed = build_sink("jsonl", SinkContext(run_dir=tmp_path, start_step=2))
    resumed.log(3, {"x": 30.0})
    resumed.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]
    assert read_metrics_jsonl(tmp_path / "metrics.jsonl") == {1: {"x": 1.0}, 2: {"x": 2.0}, 3: {"x": 30.0}}


def test_the_latest_record_of_a_step_logged_twice_wins(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "x": 1.0}\n{"step": 1, "x": 10.0}\n')
    assert read_metrics_jsonl(tmp_path / "metrics.jsonl") == {1: {"x": 10.0}}


def test_resume_also_drops_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "x": 1.0}\n{"step": 2, "x": 2.0}\n{"step": 3, "x"')
    resumed = build_sink("jsonl", SinkContext(run_dir=tmp_path, start_step=1))
    resumed.log(2, {"x": 20.0})
    resumed.close()
    assert path.read_text() == '{"step": 1, "x": 1.0}\n{"step": 2, "x": 20.0}\n'


def test_a_torn_last_line_is_skipped_and_new_lines_start_clean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "x": 1.0}\n{"step": 2, "x"')
    sink = build_sink("jsonl", SinkContext(run_dir=tmp_path))
    sink.log(2, {"x": 2.0})
    sink.close()
    assert read_metrics_jsonl(path) == {1: {"x": 1.0}, 2: {"x": 2.0}}
    assert "skipping unreadable line 2" in caplog.text


def test_logging_after_close_fails(tmp_path: Path) -> None:
    sink = build_sink("jsonl", SinkContext(run_dir=tmp_path))
    sink.close()
    with pytest.raises(ValueError, match="is closed"):
        sink.log(1, {"x": 1.0})
