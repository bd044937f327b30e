"""Building a worker's engines and roles from the run config: actor, reference, critic, rollout, weight sync.

The engine sections of the run config are rl-engines' own `TrainEngineConfig`; what the runtime decides is
filled in here: the device (`placement.device`), a cosine schedule's length (the run's steps), the critic's
value head and the reference's frozen copy. The rollout engine is built by name through
`rl_engines.rollout.ROLLOUT_ENGINES`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import torch

from rl_engines.rollout import InferenceEngine, RolloutEngineSpec, build_rollout_engine
from rl_engines.sync import ReferenceTransport, WeightSync, WeightSyncConfig
from rl_engines.training import (
    FSDPEngine,
    TrainEngineConfig,
    load_hf_config,
)
from rl_engines.vla import VLAPolicy
from rl_runtime.config import DeviceKind, KLMode, RunConfig
from rl_runtime.config._schema_engines import reference_engine_config
from rl_runtime.roles import ActorRole, CriticRole, ReferenceRole
from rl_runtime.roles._actor import ActorConfig as ActorLossConfig
from rl_runtime.roles._critic import CriticConfig as CriticLossConfig
from rl_runtime.roles._reference import ReferenceConfig as ReferenceRoleConfig

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
    algorithm = config.algorithm
    loss = ActorLossConfig(
        policy_loss=algorithm.policy_loss,
        policy_loss_params=algorithm.policy_loss_params,
        aggregation=algorithm.loss_agg_mode,
        kl_coef=algorithm.kl.coef if algorithm.kl.mode is KLMode.AS_LOSS else 0.0,
        kl_estimator=algorithm.kl.estimator,
        entropy_coef=algorithm.entropy_coef,
        temperature=config.rollout.temperature,
        ppo_epochs=config.batch.ppo_epochs,
    )
    return ActorRole(FSDPEngine.from_config(placed(config.actor, config, total_steps)), loss)


def build_reference(config: RunConfig) -> ReferenceRole | None:
    """The frozen reference policy (`reference`, or the actor's engine config when null), or None without KL."""
    if not uses_reference(config):
        return None
    engine_config = placed(reference_engine_config(config.actor, config.reference), config, None)
    role_config = ReferenceRoleConfig(
        offload_between_uses=config.algorithm.offload_reference, temperature=config.rollout.temperature
    )
    return ReferenceRole(FSDPEngine.from_config(engine_config), role_config)


def build_critic(config: RunConfig, total_steps: int) -> CriticRole | None:
    """The critic role (a value-head FSDPEngine with the clipped value loss), or None without a critic section."""
    section = config.critic
    if section is None:
        return None
    value_clip = config.algorithm.value_clip
    loss = CriticLossConfig(
        clip_range=value_clip if value_clip is not None else float("inf"),
        aggregation=config.algorithm.loss_agg_mode,
        ppo_epochs=config.batch.ppo_epochs,
    )
    with_head = dataclasses.replace(section, model=dataclasses.replace(section.model, value_head=True))
    return CriticRole(FSDPEngine.from_config(placed(with_head, config, total_steps)), loss)


def actor_hf_config(config: RunConfig) -> Any:
    """The transformers config of the actor's model, without building it (a split placement's rollout slots)."""
    return load_hf_config(config.actor.model)


def rollout_dtype(config: RunConfig) -> str:
    """The rollout engine's weight dtype: the actor's compute dtype, unless `rollout.engine_kwargs` sets one."""
    precision = config.actor.precision
    return config.rollout.engine_kwargs.get(_ENGINE_DTYPE_KEY, precision.compute_dtype or precision.param_dtype)


def rollout_spec(config: RunConfig, hf_config: Any) -> RolloutEngineSpec:
    """What the run decides about its rollout engine: the policy's config and dtype, the device and the seed,
    then `rollout.engine_kwargs`."""
    precision = config.actor.precision
    return RolloutEngineSpec(
        hf_config,
        dtype=precision.compute_dtype or precision.param_dtype,
        device=device_name(config),
        seed=config.trainer.seed,
        engine_kwargs=config.rollout.engine_kwargs,
    )


def make_rollout_engine(config: RunConfig, hf_config: Any) -> InferenceEngine:
    """The `rollout.engine` engine on a fresh model of `hf_config`; its weights are the actor's only after the
    first sync. An embodied run (an `env` section) samples from `rl_engines.vla.VLAPolicy` instead, which acts on
    observations and takes the same weight syncs (the weight-sync subset of `InferenceEngine`)."""
    if config.env is not None:
        dtype = getattr(torch, rollout_dtype(config))
        policy = VLAPolicy(hf_config, device=device_name(config), dtype=dtype, init_seed=config.trainer.seed)
        return cast("InferenceEngine", policy)
    return build_rollout_engine(config.rollout.engine, rollout_spec(config, hf_config))


def build_rollout(config: RunConfig, actor: ActorRole) -> tuple[InferenceEngine, WeightSync]:
    """This worker's rollout engine, holding the actor's current weights, and the sync that keeps it so."""
    engine = make_rollout_engine(config, actor.hf_config)
    return engine, local_weight_sync(engine, rollout_dtype(config))


def local_weight_sync(engine: InferenceEngine, dtype: str) -> WeightSync:
    """A sync of tensors into `engine` in this process, cast to `dtype` and verified by checksum. The engine's calls
    run on this thread when it bounds its own waits (the "bounded_calls" capability)."""
    inline = "bounded_calls" in engine.capabilities
    config = WeightSyncConfig(pause_mode="wait", dtype=dtype, inline_calls=inline)
    return WeightSync([engine], ReferenceTransport(), config)
