"""The wandb sink in offline mode: the run file under the run folder holds every logged step."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rl_runtime.metrics import SinkContext
from rl_runtime.metrics._sink import build_sink

from ._wandb_records import history_rows

pytest.importorskip("wandb", reason="the wandb sink needs the wandb package (pip install 'rl-runtime[wandb]')")

WANDB_FOLDER_RESOLUTION_S = 1.1
WRITE_OUT_TIMEOUT_S = 30.0


def _run_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


@pytest.fixture(autouse=True)
def _no_wandb_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A developer's WANDB_* settings (mode, API key, folders) must not leak into the test.
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb_cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))


@pytest.mark.slow
def test_offline_run_records_every_step(tmp_path: Path) -> None:
    context = SinkContext(
        run_dir=tmp_path / "run", project_name="proj", experiment_name="exp", hyperparameters={"actor": {"lr": 1e-6}}
    )
    sink = build_sink("wandb", context)
    sink.log(1, {"critic/score/mean": 0.5, "timing_s/step": 1.25})
    sink.log(2, {"critic/score/mean": 0.75})
    sink.close()
    run_id = (tmp_path / "run" / "wandb_run_id").read_text()
    [run_file] = _run_files(tmp_path / "run")
    assert run_file.name == f"run-{run_id}.wandb"
    rows = history_rows(run_file, WRITE_OUT_TIMEOUT_S)
    assert [(row["_step"], row["critic/score/mean"]) for row in rows] == [(1, 0.5), (2, 0.75)]
    assert rows[0]["timing_s/step"] == 1.25


@pytest.mark.slow
def test_resume_reuses_the_run_id(tmp_path: Path) -> None:
    first = build_sink("wandb", SinkContext(run_dir=tmp_path))
    first.log(1, {"x": 1.0})
    first.close()
    run_id = (tmp_path / "wandb_run_id").read_text()
    # wandb names an offline run's folder by the second it started; a real resume comes seconds after a crash.
    time.sleep(WANDB_FOLDER_RESOLUTION_S)
    resumed = build_sink("wandb", SinkContext(run_dir=tmp_path, start_step=1))
    resumed.log(2, {"x": 2.0})
    resumed.close()
    assert (tmp_path / "wandb_run_id").read_text() == run_id
    files = _run_files(tmp_path)
    assert len(files) == 2 and all(file.name == f"run-{run_id}.wandb" for file in files)
    assert sorted(row["_step"] for file in files for row in history_rows(file, WRITE_OUT_TIMEOUT_S)) == [1, 2]
