"""What a metrics sink is, the context sinks are built from, and the registry of sink factories by name."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import attrs

from rl_core import lookup, nearest_name, registrar
from rl_runtime.metrics._errors import MetricsError, missing_extra

WANDB_MODES = ("offline", "online", "disabled")
"""`offline` writes the run under the run folder and needs no network; `wandb sync` uploads it later."""


@runtime_checkable
class MetricSink(Protocol):
    """Somewhere a step's scalar metrics go: a file, a progress bar, a tracking service."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record the metrics of `step` (scalars keyed by verl-style names such as `timing_s/gen`)."""

    def close(self) -> None:
        """Flush and release everything; the sink takes no more steps."""


def _fail(field: str, expected: str, value: object, fix: str) -> MetricsError:
    return MetricsError(f"sink context {field}: expected {expected}, found {value!r}; {fix}")


def _check_non_empty(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise _fail(attribute.name, "a non-empty string", value, f"set {attribute.name} to a name")


def _check_total_steps(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise _fail(attribute.name, "an int >= 1 or None (unknown)", value, "pass the planned number of steps")


def _check_start_step(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(attribute.name, "an int >= 0", value, "pass the number of steps already done (0 on a fresh run)")


def _check_wandb_mode(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in WANDB_MODES:
        near = nearest_name(str(value), WANDB_MODES)
        hint = f"did you mean {near!r}?" if near else f"use one of {', '.join(WANDB_MODES)}"
        raise _fail(attribute.name, f"one of {', '.join(WANDB_MODES)}", value, hint)


@attrs.frozen
class SinkContext:
    """What every sink is built from: where the run writes, its names, its length and its hyperparameters."""

    run_dir: Path = attrs.field(converter=Path)
    """The run's output folder; file sinks write under it (`metrics.jsonl`, `tensorboard/`, `wandb/`, `mlruns/`)."""
    project_name: str = attrs.field(default="rl", validator=_check_non_empty)
    """Project (wandb) or experiment (mlflow) the run belongs to."""
    experiment_name: str = attrs.field(default="run", validator=_check_non_empty)
    """The run's display name."""
    total_steps: int | None = attrs.field(default=None, validator=_check_total_steps)
    """Planned training steps, for the progress bar's ETA; None when unknown."""
    start_step: int = attrs.field(default=0, validator=_check_start_step)
    """Steps already done before this process started (a resumed run); 0 on a fresh run. Steps count from 1,
    as verl's `global_steps`: the first step this process logs is `start_step + 1`."""
    hyperparameters: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    """The run config as plain data, recorded by the tracking sinks."""
    wandb_mode: str = attrs.field(default="offline", validator=_check_wandb_mode)
    """wandb's mode: offline (no network), online or disabled."""
    mlflow_tracking_uri: str | None = attrs.field(default=None)
    """MLflow tracking URI; None is a file store under `run_dir/mlruns`."""


SinkFactory = Callable[[SinkContext], MetricSink]
LOG_SINKS: dict[str, SinkFactory] = {}
"""Sink factories by the name `trainer.log_sinks` lists."""
register_sink = registrar(LOG_SINKS, "log sink")
"""`@register_sink("name")` on a `SinkFactory` makes the sink available by that name."""


SINK_EXTRAS: dict[str, tuple[str, str]] = {}
"""For each optional sink, the package it imports first when built and the rl-runtime extra that provides it."""


def missing_sink_extra(name: str) -> str | None:
    """None when log sink `name`'s optional package is installed (or it needs none), else the message the sink would
    raise when built (the package and the pip install that provides it); found without importing the package."""
    needed = SINK_EXTRAS.get(name)
    if needed is None or importlib.util.find_spec(needed[0]) is not None:
        return None
    module, extra = needed
    return str(missing_extra(name, module, extra))


def build_sink(name: str, context: SinkContext) -> MetricSink:
    """The sink registered as `name`, built for `context`; an unknown name lists the registered ones."""
    return lookup(LOG_SINKS, name, "log sink")(context)


def import_extra(module: str, sink: str, extra: str) -> ModuleType:
    """Import optional `module` for `sink`, or raise `MissingExtraError` naming rl-runtime's `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(sink, module, extra) from exc


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of dotted keys: `{"actor": {"lr": 1}}` -> `{"actor.lr": 1}`."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat
