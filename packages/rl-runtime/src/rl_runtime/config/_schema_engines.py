"""The run config's engine sections: `actor`, `critic` and `reference` are rl-engines' own `TrainEngineConfig`.

The run decides what an engine config leaves to its caller, and these checks refuse, at load time, the
settings that would contradict those decisions:
- where the engine runs: `placement.device` (an engine section's `device` stays "auto");
- a cosine schedule's length: `schedule.total_steps` null means the run's training steps;
- the value head: the critic gets one, the actor and the reference do not;
- the reference is frozen: no optimizer of its own; a null `reference` is the actor's engine config,
  frozen (`reference_engine_config`); the actor and the critic are trained, so they need one;
- FSDP2 CPU offload moves shards off a CUDA device, so it needs `placement.device` to be one.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from rl_engines.training import OffloadConfig, OptimizerConfig, ScheduleConfig, TrainEngineConfig
from rl_runtime.config._errors import ConfigProblem, describe_value
from rl_runtime.config._schema_sections import DeviceKind

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

ENGINE_SECTIONS = ("actor", "critic", "reference")
"""The run-config sections that hold a `TrainEngineConfig`."""
TRAINED_SECTIONS = ("actor", "critic")
"""The engine sections the run trains (the reference is frozen)."""
_AUTO_DEVICE = "auto"
_COSINE = "cosine"


def on_gpu(config: RunConfig) -> bool:
    """Whether `config`'s slots are GPUs: `placement.device` cuda, or auto with CUDA visible here."""
    device = config.placement.device
    return device is DeviceKind.CUDA or (device is DeviceKind.AUTO and torch.cuda.is_available())


def engine_sections(config: RunConfig) -> list[tuple[str, TrainEngineConfig]]:
    """(section name, engine config) of each engine section `config` sets."""
    sections = ((name, getattr(config, name)) for name in ENGINE_SECTIONS)
    return [(name, section) for name, section in sections if section is not None]


def reference_engine_config(actor: TrainEngineConfig, reference: TrainEngineConfig | None) -> TrainEngineConfig:
    """The reference policy's engine config, frozen (no optimizer, a constant schedule): `reference`, or when null
    the actor's model, precision, micro-batching and data-parallel mode, without the actor's training-only memory
    settings (activation checkpointing, FSDP2 CPU offload)."""
    if reference is not None:
        return dataclasses.replace(reference, optimizer=None, schedule=ScheduleConfig())
    model = dataclasses.replace(actor.model, gradient_checkpointing=False)
    return dataclasses.replace(actor, model=model, optimizer=None, schedule=ScheduleConfig(), offload=OffloadConfig())


def _device_problems(config: RunConfig) -> list[ConfigProblem]:
    return [
        ConfigProblem(
            f"{name}.device",
            f"{_AUTO_DEVICE!r}: the run places every engine on placement.device",
            describe_value(section.device),
            f"remove {name}.device and set placement.device",
        )
        for name, section in engine_sections(config)
        if section.device != _AUTO_DEVICE
    ]


def _value_head_problems(config: RunConfig) -> list[ConfigProblem]:
    return [
        ConfigProblem(
            f"{name}.model.value_head",
            "false: only the critic has a value head (the run adds it to the critic's model)",
            "true",
            f"remove {name}.model.value_head",
        )
        for name, section in engine_sections(config)
        if name != "critic" and section.model.value_head
    ]


def _reference_problems(config: RunConfig) -> list[ConfigProblem]:
    reference = config.reference
    if reference is None:
        return []
    problems = []
    if reference.optimizer is not None and reference.optimizer != OptimizerConfig():
        problems.append(
            ConfigProblem(
                "reference.optimizer",
                "null or unset: the reference policy is frozen",
                "optimizer settings",
                "remove reference.optimizer",
            )
        )
    if reference.schedule != ScheduleConfig():
        problems.append(
            ConfigProblem(
                "reference.schedule",
                "unset: the reference policy is frozen",
                "schedule settings",
                "remove reference.schedule",
            )
        )
    return problems


def _optimizer_problems(config: RunConfig) -> list[ConfigProblem]:
    # The roles refuse a frozen engine when the workers build them (RoleConfigError); refused here instead.
    return [
        ConfigProblem(
            f"{name}.optimizer",
            f"optimizer settings: the {name} is trained (a null optimizer builds a frozen engine, for the reference)",
            "null",
            f"remove {name}.optimizer: null to train with the default AdamW, or set {name}.optimizer.lr",
        )
        for name, section in engine_sections(config)
        if name in TRAINED_SECTIONS and section.optimizer is None
    ]


def _offload_problems(config: RunConfig) -> list[ConfigProblem]:
    # The engine refuses the offload off CUDA when it is built in the worker (TrainConfigError); refused here instead.
    if on_gpu(config):
        return []
    device = config.placement.device.value
    return [
        ConfigProblem(
            f"{name}.offload.fsdp_cpu_offload",
            f"false with placement.device={device!r}{' (no CUDA device visible)' if device == 'auto' else ''}: the "
            "offload moves FSDP2 shards from a CUDA device to the CPU",
            "true",
            f"remove {name}.offload.fsdp_cpu_offload, or run on CUDA (placement.device=cuda)",
        )
        for name, section in engine_sections(config)
        if section.offload.fsdp_cpu_offload
    ]


def _schedule_problems(config: RunConfig, run_steps: int | None) -> list[ConfigProblem]:
    problems = []
    for name, section in engine_sections(config):
        schedule = section.schedule
        total = schedule.total_steps or run_steps
        if name == "reference" or schedule.kind != _COSINE or total is None or total > schedule.warmup_steps:
            continue
        expected = f"< trainer.total_steps={total} (the cosine schedule decays after the warm-up)"
        problems.append(ConfigProblem(f"{name}.schedule.warmup_steps", expected, str(schedule.warmup_steps)))
    return problems


def _budget_problems(config: RunConfig, max_sequence_length: int) -> list[ConfigProblem]:
    # The actor's budget is part of the batch plan, which checks it with the plan's other numbers.
    problems = []
    for name, section in engine_sections(config):
        budget = section.micro_batch.max_tokens_per_micro_batch
        if name == "actor" or budget >= max_sequence_length:
            continue
        problems.append(
            ConfigProblem(
                f"{name}.micro_batch.max_tokens_per_micro_batch",
                f"at least one full sequence: max_prompt_length + max_response_length = {max_sequence_length}",
                f"max_tokens_per_micro_batch={budget}",
                f"raise it to at least {max_sequence_length} or shorten the maximum lengths",
            )
        )
    return problems


def engine_problems(config: RunConfig) -> list[ConfigProblem]:
    """Every setting of the engine sections of `config` that contradicts the run's decisions."""
    longest = config.data.max_prompt_length + config.data.max_response_length
    return [
        *_device_problems(config),
        *_value_head_problems(config),
        *_reference_problems(config),
        *_optimizer_problems(config),
        *_offload_problems(config),
        *_schedule_problems(config, config.trainer.total_steps),
        *_budget_problems(config, longest),
    ]
