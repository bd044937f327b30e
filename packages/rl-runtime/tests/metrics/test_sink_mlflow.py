"""The mlflow sink: a file store under the run folder whose metric files hold every logged step."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.metrics import SinkContext
from rl_runtime.metrics._sink import build_sink
from rl_runtime.metrics._sink_mlflow import MlflowSink

pytest.importorskip("mlflow", reason="the mlflow sink needs mlflow-skinny (pip install 'rl-runtime[mlflow]')")

ALLOW = "MLFLOW_ALLOW_FILE_STORE"


@pytest.fixture(autouse=True)
def _restore_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sink sets MLflow's file-store opt-in; set then delete so monkeypatch restores the original afterwards.
    monkeypatch.setenv(ALLOW, "placeholder")
    monkeypatch.delenv(ALLOW)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _metric_file(run_dir: Path, run_id: str, name: str) -> list[tuple[int, float]]:
    [path] = (run_dir / "mlruns").glob(f"*/{run_id}/metrics/{name}")
    rows = [line.split() for line in path.read_text().splitlines()]  # "timestamp value step"
    return [(int(step), float(value)) for _, value, step in rows]


@pytest.mark.slow
def test_file_store_holds_metrics_and_params(tmp_path: Path) -> None:
    context = SinkContext(
        run_dir=tmp_path, project_name="proj", experiment_name="exp", hyperparameters={"actor": {"lr": 1e-6}}
    )
    sink = build_sink("mlflow", context)
    assert isinstance(sink, MlflowSink)
    sink.log(1, {"critic/score/mean": 0.5, "timing_s/step": 1.25})
    sink.log(2, {"critic/score/mean": 0.75})
    sink.close()
    run_id = (tmp_path / "mlflow_run_id").read_text()
    assert run_id == sink.run_id
    assert _metric_file(tmp_path, run_id, "critic/score/mean") == [(1, 0.5), (2, 0.75)]
    assert _metric_file(tmp_path, run_id, "timing_s/step") == [(1, 1.25)]
    [param] = tmp_path.glob(f"mlruns/*/{run_id}/params/actor.lr")
    assert param.read_text() == "1e-06"
    [meta] = tmp_path.glob(f"mlruns/*/{run_id}/meta.yaml")
    assert "status: 3" in meta.read_text()  # FINISHED


@pytest.mark.slow
def test_resume_continues_the_run(tmp_path: Path) -> None:
    first = build_sink("mlflow", SinkContext(run_dir=tmp_path))
    first.log(1, {"x": 1.0})
    first.close()
    resumed = build_sink("mlflow", SinkContext(run_dir=tmp_path, start_step=1))
    resumed.log(2, {"x": 2.0})
    resumed.close()
    assert resumed.run_id == first.run_id  # type: ignore[attr-defined]
    assert _metric_file(tmp_path, first.run_id, "x") == [(1, 1.0), (2, 2.0)]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_user_opt_out_is_respected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW, "false")
    with pytest.raises(Exception, match="MLFLOW_ALLOW_FILE_STORE=true"):
        build_sink("mlflow", SinkContext(run_dir=tmp_path))
