"""Checks of the rollout section against the rest of the run: the engine's packages, its servers, and which
weight-sync transports its placement allows (`weight_sync_transports`, fastest first; "auto" takes the first).

Where the engine runs decides the transports:
- in the worker's process ("hf", "vllm", engines of plugins): by reference, shared memory, disk; broadcast on CPU
  only (NCCL refuses two ranks of one process on one GPU);
- a rollout server on this host ("server" without `servers`, or only loopback addresses): shared memory, disk;
  broadcast on CPU only (the same GPU again);
- rollout servers on other hosts: broadcast, disk (the output folder must be on a filesystem they share).
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from rl_core.workflows import WorkflowLoadError, load_workflow
from rl_engines.rollout import (
    HFEngineConfig,
    InvalidRequestError,
    RolloutEngineSpec,
    hf_engine_config,
    missing_engine_extra,
)
from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_engines import on_gpu
from rl_runtime.config._schema_rewards import policy_slots
from rl_runtime.config._schema_sections import WeightSyncKind

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

SERVER_ENGINE = "server"
"""The rollout engine that talks to rollout servers over HTTP."""
HF_ENGINE = "hf"
"""The in-process transformers rollout engine."""
_LOCAL_HOSTS = ("localhost",)


class EngineLocation(enum.Enum):
    """Where a run's rollout engine holds its weights, relative to the trainer worker that syncs them."""

    IN_PROCESS = "in the trainer worker's process"
    LOCAL_SERVER = "in a rollout server on the worker's host"
    REMOTE_SERVER = "in rollout servers on other hosts"


def _is_loopback(address: str) -> bool:
    host = urlparse(address).hostname or ""
    if host in _LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def engine_location(config: RunConfig) -> EngineLocation:
    """Where `config`'s rollout engine runs (see the module doc)."""
    rollout = config.rollout
    if rollout.engine != SERVER_ENGINE:
        return EngineLocation.IN_PROCESS
    if all(_is_loopback(address) for address in rollout.servers):
        return EngineLocation.LOCAL_SERVER
    return EngineLocation.REMOTE_SERVER


def weight_sync_transports(config: RunConfig) -> tuple[WeightSyncKind, ...]:
    """The transports `config`'s rollout engine placement allows, fastest first."""
    location = engine_location(config)
    same_device_group = () if on_gpu(config) else (WeightSyncKind.BROADCAST,)
    if location is EngineLocation.IN_PROCESS:
        return (WeightSyncKind.REFERENCE, WeightSyncKind.SHARED_MEMORY, *same_device_group, WeightSyncKind.DISK)
    if location is EngineLocation.LOCAL_SERVER:
        return (WeightSyncKind.SHARED_MEMORY, *same_device_group, WeightSyncKind.DISK)
    return (WeightSyncKind.BROADCAST, WeightSyncKind.DISK)


def resolve_weight_sync(config: RunConfig) -> WeightSyncKind:
    """`rollout.weight_sync`, with "auto" replaced by the fastest transport the placement allows."""
    if config.rollout.weight_sync is WeightSyncKind.AUTO:
        return weight_sync_transports(config)[0]
    return config.rollout.weight_sync


def _settings_problems(
    engine: str, owner: type, settings: Mapping[str, Any], build: Callable[[str, Any], object]
) -> list[ConfigProblem]:
    """The `rollout.engine_kwargs` of `engine` that its config class `owner` would refuse at worker start, refused now:
    unknown keys, then each value as `build(name, value)` (the engine's own config with that one setting) takes it."""
    known = sorted(field.name for field in dataclasses.fields(owner))  # type: ignore[arg-type]  # a dataclass
    unknown = sorted(set(settings) - set(known))
    if unknown:
        return [
            ConfigProblem(
                "rollout.engine_kwargs",
                f"settings of the {engine} engine: {', '.join(known)}",
                ", ".join(unknown),
                "remove or rename them",
            )
        ]
    problems = []
    for name, value in settings.items():
        try:
            build(name, value)
        except (InvalidRequestError, TypeError, ValueError) as error:
            problems.append(
                ConfigProblem(
                    f"rollout.engine_kwargs.{name}",
                    f"a value the {engine} engine accepts",
                    repr(value),
                    str(error).replace(f"{owner.__name__}.", "rollout.engine_kwargs."),
                )
            )
    return problems


def _server_settings_problems(settings: Mapping[str, Any]) -> list[ConfigProblem]:
    """The "server" engine's `rollout.engine_kwargs` it would refuse at worker start, refused now instead."""
    from rl_engines.remote import ServerEngineConfig

    return _settings_problems(
        "server", ServerEngineConfig, settings, lambda name, value: ServerEngineConfig(**{name: value})
    )


def _hf_settings_problems(config: RunConfig) -> list[ConfigProblem]:
    """The "hf" engine's `rollout.engine_kwargs` it would refuse at worker start, refused now: each one is handed to
    the engine's builder (`hf_engine_config`) with the dtype, device and seed the run gives it."""
    precision = config.actor.precision

    def build(name: str, value: Any) -> object:
        spec = RolloutEngineSpec(
            hf_config=None,
            dtype=precision.compute_dtype or precision.param_dtype,
            device="cuda" if on_gpu(config) else "cpu",
            seed=config.trainer.seed,
            engine_kwargs={name: value},
        )
        return hf_engine_config(spec)

    return _settings_problems(HF_ENGINE, HFEngineConfig, config.rollout.engine_kwargs, build)


def rollout_problems(config: RunConfig) -> list[ConfigProblem]:
    """What is wrong with the rollout section given the rest of the run (see the module doc)."""
    rollout, problems = config.rollout, []
    missing = missing_engine_extra(rollout.engine)
    if missing is not None:
        problems.append(
            ConfigProblem("rollout.engine", "an engine whose packages are installed", rollout.engine, missing)
        )
    if rollout.engine == SERVER_ENGINE and missing is None:
        problems += _server_settings_problems(rollout.engine_kwargs)
    if rollout.engine == HF_ENGINE and config.env is None:  # an embodied run samples from its VLA policy instead
        problems += _hf_settings_problems(config)
    if rollout.servers and rollout.engine != SERVER_ENGINE:
        problems.append(
            ConfigProblem(
                "rollout.servers",
                f"no addresses with rollout.engine={rollout.engine!r} (only the {SERVER_ENGINE!r} engine uses them)",
                str(list(rollout.servers)),
                f"set rollout.engine={SERVER_ENGINE} or remove rollout.servers",
            )
        )
    slots = policy_slots(config)
    if rollout.servers and config.placement.colocate and len(rollout.servers) < slots:
        problems.append(
            ConfigProblem(
                "rollout.servers",
                f"at least one address per rollout slot ({slots} colocated slots)",
                f"{len(rollout.servers)} addresses",
                "add servers, or leave rollout.servers empty to start one on each slot",
            )
        )
    try:
        load_workflow(rollout.workflow, rollout.workflow_kwargs)
    except WorkflowLoadError as exc:
        problems.append(
            ConfigProblem(
                "rollout.workflow",
                "a workflow that loads and builds with rollout.workflow_kwargs",
                rollout.workflow,
                str(exc),
            )
        )
    allowed = weight_sync_transports(config)
    if rollout.weight_sync is not WeightSyncKind.AUTO and rollout.weight_sync not in allowed:
        names = ", ".join(kind.value for kind in allowed)
        where = engine_location(config).value
        problems.append(
            ConfigProblem(
                "rollout.weight_sync",
                f"a transport that reaches an engine {where} on {'GPU' if on_gpu(config) else 'CPU'}: {names}",
                rollout.weight_sync.value,
                f"use auto (here {allowed[0].value}) or one of {names}",
            )
        )
    return problems
