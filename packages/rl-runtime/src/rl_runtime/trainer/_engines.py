"""Building a worker's engines and roles from the run config: actor, reference, critic, rollout, weight sync.

The engine sections of the run config are rl-engines' own `TrainEngineConfig`; what the runtime decides is
filled in here: the device (`placement.device`), a cosine schedule's length (the run's steps), the critic's
value head and the reference's frozen copy. Each role reads its loss from the run config itself
(`ActorRole.from_config`: the `algorithm` section, `rollout.temperature`, `batch.ppo_epochs`). The rollout
engine is built by name through `rl_engines.rollout.ROLLOUT_ENGINES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import torch

from rl_engines.rollout import InferenceEngine, RolloutEngineSpec, build_rollout_engine
from rl_engines.sync import ReferenceTransport, WeightSync, WeightSyncConfig, WeightTransport
from rl_engines.training import (
    FSDPEngine,
    TrainEngineConfig,
    load_hf_config,
)
from rl_engines.vla import VLAPolicy, is_openvla_folder, read_openvla_spec
from rl_runtime.config import DeviceKind, KLMode, RunConfig
from rl_runtime.config._schema_engines import reference_engine_config
from rl_runtime.roles import ActorRole, CriticRole, ReferenceRole

_ENGINE_DTYPE_KEY = "dtype"
"""An engine's own `dtype` setting in `rollout.engine_kwargs` overrides the policy's compute dtype."""


def device_name(config: RunConfig) -> str:
    """ "cuda" or "cpu" for this run's slots."""
    if config.placement.device is DeviceKind.AUTO:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.placement.device.value


def placed(section: TrainEngineConfig, config: RunConfig, total_steps: int | None) -> TrainEngineConfig:
    """`section` as this run builds it: on the run's device, with `total_steps` as its schedule's length unless
    the section sets one."""
    schedule = section.schedule
    if schedule.total_steps is None and total_steps is not None:
        schedule = dataclasses.replace(schedule, total_steps=total_steps)
    return dataclasses.replace(section, device=device_name(config), schedule=schedule)


def uses_reference(config: RunConfig) -> bool:
    """Whether the run needs the reference policy: a KL term in the loss or in the reward."""
    kl = config.algorithm.kl
    return kl.mode is KLMode.IN_REWARD or (kl.mode is KLMode.AS_LOSS and kl.coef > 0)


def build_actor(config: RunConfig, total_steps: int) -> ActorRole:
    """The actor role: an FSDPEngine with the configured policy loss, KL loss and entropy bonus."""
    return ActorRole.from_config(config, FSDPEngine.from_config(placed(config.actor, config, total_steps)))


def build_reference(config: RunConfig) -> ReferenceRole | None:
    """The frozen reference policy (`reference`, or the actor's engine config when null), or None without KL."""
    if not uses_reference(config):
        return None
    engine_config = placed(reference_engine_config(config.actor, config.reference), config, None)
    return ReferenceRole.from_config(config, FSDPEngine.from_config(engine_config))


def build_critic(config: RunConfig, total_steps: int) -> CriticRole | None:
    """The critic role (a value-head FSDPEngine with the clipped value loss), or None without a critic section."""
    section = config.critic
    if section is None:
        return None
    with_head = dataclasses.replace(section, model=dataclasses.replace(section.model, value_head=True))
    return CriticRole.from_config(config, FSDPEngine.from_config(placed(with_head, config, total_steps)))


def actor_hf_config(config: RunConfig) -> Any:
    """The transformers config of the actor's model, without building it (a split placement's rollout slots); for
    an OpenVLA-OFT checkpoint folder, its `OpenVLASpec` (what `VLAPolicy` loads it from and the env checks read:
    the checkpoint's own config class is remote code)."""
    if is_openvla_folder(config.actor.model.path):
        return read_openvla_spec(str(config.actor.model.path))
    return load_hf_config(config.actor.model)


def rollout_dtype(config: RunConfig) -> str:
    """The rollout engine's weight dtype: the actor's compute dtype, unless `rollout.engine_kwargs` sets one."""
    precision = config.actor.precision
    return config.rollout.engine_kwargs.get(_ENGINE_DTYPE_KEY, precision.compute_dtype or precision.param_dtype)


def rollout_servers(config: RunConfig, rank: int, ranks: int) -> tuple[str, ...]:
    """Rollout slot `rank`'s share of `rollout.servers` (every `ranks`-th address from its own); empty when the run
    lists none (the "server" engine then starts its own)."""
    return tuple(config.rollout.servers[rank::ranks])


def rollout_spec(config: RunConfig, hf_config: Any, rank: int = 0, ranks: int = 1) -> RolloutEngineSpec:
    """What the run decides about rollout slot `rank`'s engine (of `ranks`): the policy's config, checkpoint and
    dtype, the device, the seed, its servers, then `rollout.engine_kwargs`."""
    precision = config.actor.precision
    path = config.actor.model.path
    return RolloutEngineSpec(
        hf_config,
        dtype=precision.compute_dtype or precision.param_dtype,
        device=device_name(config),
        seed=config.trainer.seed,
        engine_kwargs=config.rollout.engine_kwargs,
        servers=rollout_servers(config, rank, ranks),
        model_path=None if path is None else str(path),
    )


def make_rollout_engine(config: RunConfig, hf_config: Any, rank: int = 0, ranks: int = 1) -> InferenceEngine:
    """The `rollout.engine` engine of rollout slot `rank` (of `ranks`) on a fresh model of `hf_config`; its weights
    are the actor's only after the first sync. An embodied run (an `env` section) samples from
    `rl_engines.vla.VLAPolicy` instead, which acts on observations and takes the same weight syncs (the weight-sync
    subset of `InferenceEngine`)."""
    if config.env is not None:
        dtype = getattr(torch, rollout_dtype(config))
        policy = VLAPolicy(hf_config, device=device_name(config), dtype=dtype, init_seed=config.trainer.seed)
        return cast("InferenceEngine", policy)
    return build_rollout_engine(config.rollout.engine, rollout_spec(config, hf_config, rank, ranks))


def build_rollout(
    config: RunConfig, actor: ActorRole, rank: int = 0, ranks: int = 1, transport: WeightTransport | None = None
) -> tuple[InferenceEngine, WeightSync]:
    """This worker's rollout engine (slot `rank` of `ranks`), holding the actor's current weights, and the sync that
    keeps it so over `transport` (None: by reference)."""
    engine = make_rollout_engine(config, actor.hf_config, rank, ranks)
    return engine, local_weight_sync(engine, rollout_dtype(config), transport)


def local_weight_sync(
    engine: InferenceEngine | Sequence[InferenceEngine],
    dtype: str,
    transport: WeightTransport | None = None,
    *,
    keep_requests: bool = False,
    timeout_s: float | None = None,
) -> WeightSync:
    """A sync of tensors into `engine` (or each of several engines: a server fleet's servers) over `transport` (None:
    by reference, in this process), cast to `dtype` and verified by checksum. The engines' calls run on this thread
    when they bound their own waits (the "bounded_calls" capability). With `keep_requests` (continuous generation)
    requests in flight are parked for the load and continue under the new weights (`pause("keep")`); otherwise the
    load waits for them to finish. `timeout_s` bounds each engine call of the sync (None: the sync's default)."""
    engines = list(engine) if isinstance(engine, Sequence) else [engine]
    inline = all("bounded_calls" in target.capabilities for target in engines)
    config = WeightSyncConfig(pause_mode="keep" if keep_requests else "wait", dtype=dtype, inline_calls=inline)
    if timeout_s is not None:
        config = dataclasses.replace(config, timeout_s=timeout_s)
    return WeightSync(engines, transport or ReferenceTransport(), config)
