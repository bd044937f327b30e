"""The sink registry, the context sinks are built from, and the error a missing optional package gives."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from rl_core import DuplicateNameError, UnknownNameError
from rl_runtime.metrics import LOG_SINKS, MetricSink, MissingExtraError, SinkContext, register_sink
from rl_runtime.metrics._sink import build_sink, flatten


def test_builtin_sinks_are_registered() -> None:
    assert {"console", "jsonl", "tensorboard", "wandb", "mlflow"} <= set(LOG_SINKS)


def test_unknown_sink_names_the_nearest(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match=r"unknown log sink 'jsonlines' \(did you mean 'jsonl'\?\)"):
        build_sink("jsonlines", SinkContext(run_dir=tmp_path))


class _ListSink:
    def __init__(self) -> None:
        self.steps: list[int] = []

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.steps.append(step)

    def close(self) -> None:
        pass


def test_register_sink_adds_a_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(LOG_SINKS, "probe", raising=False)
    register_sink("probe")(lambda context: _ListSink())
    monkeypatch.setitem(LOG_SINKS, "probe", LOG_SINKS["probe"])  # removed again after the test
    sink = build_sink("probe", SinkContext(run_dir=tmp_path))
    assert isinstance(sink, MetricSink)
    with pytest.raises(DuplicateNameError, match="log sink 'probe' is already registered"):
        register_sink("probe")(lambda context: _ListSink())


@pytest.mark.parametrize(("sink", "module"), [("wandb", "wandb"), ("mlflow", "mlflow"), ("tensorboard", "tensorboard")])
def test_missing_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sink: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MissingExtraError, match=rf"pip install 'rl-runtime\[{sink}\]'"):
        build_sink(sink, SinkContext(run_dir=tmp_path))


def test_context_defaults_and_conversion(tmp_path: Path) -> None:
    context = SinkContext(run_dir=str(tmp_path), hyperparameters={"a": 1})  # type: ignore[arg-type]
    assert context.run_dir == tmp_path
    assert (context.wandb_mode, context.start_step, context.total_steps) == ("offline", 0, None)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("project_name", "", r"sink context project_name: expected a non-empty string, found ''"),
        ("experiment_name", 3, r"sink context experiment_name: expected a non-empty string, found 3"),
        ("total_steps", 0, r"total_steps: expected an int >= 1 or None \(unknown\), found 0"),
        ("start_step", -1, r"start_step: expected an int >= 0, found -1"),
        ("wandb_mode", "ofline", r"wandb_mode: expected one of offline, online, disabled.*did you mean 'offline'"),
    ],
)
def test_context_rejections(tmp_path: Path, field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SinkContext(run_dir=tmp_path, **{field: value})  # type: ignore[arg-type]


def test_flatten_nests_with_dots() -> None:
    assert flatten({"actor": {"optim": {"lr": 1e-6}}, "seed": 1}) == {"actor.optim.lr": 1e-6, "seed": 1}
