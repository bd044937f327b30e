"""Building a worker's engines and roles from the run config: actor, reference, critic, rollout, weight sync."""

from __future__ import annotations

from typing import Any

import torch

from rl_engines.rollout import HFEngine, HFEngineConfig, InferenceEngine
from rl_engines.sync import ReferenceTransport, WeightSync, WeightSyncConfig
from rl_engines.training import (
    ActorConfig as ActorLossConfig,
)
from rl_engines.training import (
    ActorRole,
    CriticRole,
    FSDPEngine,
    MicroBatchConfig,
    ModelConfig,
    OffloadConfig,
    OptimizerConfig,
    PrecisionConfig,
    ReferenceRole,
    ScheduleConfig,
    TrainEngineConfig,
)
from rl_engines.training import (
    CriticConfig as CriticLossConfig,
)
from rl_engines.training import (
    ReferenceConfig as ReferenceRoleConfig,
)
from rl_runtime.config import ActorConfig, DataParallel, DeviceKind, KLMode, ModelSourceConfig, RunConfig
from rl_runtime.trainer._errors import TrainerError

_PARAM_DTYPE = "float32"
"""Master weights and optimizer states stay in float32; the section's dtype is the compute dtype."""


def device_name(config: RunConfig) -> str:
    """ "cuda" or "cpu" for this run's slots."""
    if config.placement.device is DeviceKind.AUTO:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.placement.device.value


def hf_model_config(source: ModelSourceConfig) -> Any:
    """The transformers config of `source.hf_config` (None when the model comes from a folder)."""
    if source.hf_config is None:
        return None
    from transformers import AutoConfig

    fields = dict(source.hf_config)
    try:
        return AutoConfig.for_model(fields.pop("model_type"), **fields)
    except (ValueError, KeyError) as error:
        raise TrainerError(f"model.hf_config does not build a transformers config: {error}") from None


def _model_config(source: ModelSourceConfig, *, gradient_checkpointing: bool, value_head: bool) -> ModelConfig:
    return ModelConfig(
        path=source.path,
        hf_config=hf_model_config(source),
        tokenizer_path=source.tokenizer_path,
        attn_implementation=source.attn_implementation,
        gradient_checkpointing=gradient_checkpointing,
        value_head=value_head,
        init_seed=source.init_seed,
    )


def train_engine_config(
    section: ActorConfig, config: RunConfig, total_steps: int, *, value_head: bool = False
) -> TrainEngineConfig:
    """The FSDPEngine settings of the actor (or, with `value_head`, the critic) section."""
    optim = section.optim
    return TrainEngineConfig(
        model=_model_config(
            section.model, gradient_checkpointing=section.activation_checkpointing, value_head=value_head
        ),
        precision=PrecisionConfig(param_dtype=_PARAM_DTYPE, compute_dtype=section.dtype.value),
        optimizer=OptimizerConfig(
            lr=optim.lr,
            betas=optim.betas,
            eps=optim.eps,
            weight_decay=optim.weight_decay,
            max_grad_norm=optim.grad_clip,
        ),
        schedule=ScheduleConfig(
            kind=optim.schedule.value,
            warmup_steps=optim.warmup_steps,
            total_steps=total_steps,
            min_lr_ratio=optim.min_lr_ratio,
        ),
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=config.batch.max_tokens_per_micro_batch),
        offload=OffloadConfig(fsdp_cpu_offload=section.cpu_offload, pin_memory=section.pin_memory),
        device=device_name(config),
        data_parallel=section.data_parallel.value,
    )


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
    return ActorRole(FSDPEngine.from_config(train_engine_config(config.actor, config, total_steps)), loss)


def build_reference(config: RunConfig) -> ReferenceRole | None:
    """The frozen reference policy (the actor's initial model unless `reference.model` is set), or None; its slots
    share it as the actor's do (`actor.data_parallel`)."""
    if not uses_reference(config):
        return None
    section = config.reference
    source = section.model or config.actor.model
    data_parallel = config.actor.data_parallel
    # A frozen model needs no float32 master weights: ddp replicas (which have no mixed precision) hold the
    # compute dtype itself; FSDP2 keeps float32 shards and casts them when it gathers.
    param_dtype = section.dtype.value if data_parallel is DataParallel.DDP else _PARAM_DTYPE
    engine_config = TrainEngineConfig(
        model=_model_config(source, gradient_checkpointing=False, value_head=False),
        precision=PrecisionConfig(param_dtype=param_dtype, compute_dtype=section.dtype.value),
        optimizer=None,
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=config.batch.max_tokens_per_micro_batch),
        device=device_name(config),
        data_parallel=data_parallel.value,
    )
    role_config = ReferenceRoleConfig(offload_between_uses=section.cpu_offload, temperature=config.rollout.temperature)
    return ReferenceRole(FSDPEngine.from_config(engine_config), role_config)


def build_critic(config: RunConfig, total_steps: int) -> CriticRole | None:
    """The critic role (a value-head FSDPEngine with the clipped value loss), or None without a critic section."""
    section = config.critic
    if section is None:
        return None
    loss = CriticLossConfig(
        clip_range=section.value_clip if section.value_clip is not None else float("inf"),
        aggregation=config.algorithm.loss_agg_mode,
        ppo_epochs=config.batch.ppo_epochs,
    )
    engine = FSDPEngine.from_config(train_engine_config(section, config, total_steps, value_head=True))
    return CriticRole(engine, loss)


def actor_hf_config(config: RunConfig) -> Any:
    """The transformers config of the actor's model, without building it (a split placement's rollout slots)."""
    source = config.actor.model
    if source.hf_config is not None:
        return hf_model_config(source)
    if source.path is None:  # the config's validator requires one of the two
        raise TrainerError("actor.model has neither a path nor an hf_config; set one")
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(source.path, local_files_only=True)


def rollout_engine_config(config: RunConfig) -> HFEngineConfig:
    """The rollout engine's settings: the actor's dtype, the run's device and seed, then `rollout.engine_kwargs`."""
    if config.rollout.engine != "hf":
        raise TrainerError(
            f"rollout.engine={config.rollout.engine!r} is not wired into the built-in trainer yet; it runs the "
            "in-process 'hf' engine (server/vllm/sglang engines work standalone through rl_engines)"
        )
    settings = {"dtype": config.actor.dtype.value, "device": device_name(config), "seed": config.trainer.seed}
    try:
        return HFEngineConfig(**{**settings, **config.rollout.engine_kwargs})
    except TypeError as error:
        raise TrainerError(f"rollout.engine_kwargs has a key HFEngineConfig does not take: {error}") from None


def build_rollout_engine(config: RunConfig, hf_config: Any) -> HFEngine:
    """A rollout engine on a fresh model of `hf_config`; its weights are the actor's only after the first sync."""
    from transformers import AutoModelForCausalLM

    engine_config = rollout_engine_config(config)
    return HFEngine(AutoModelForCausalLM.from_config(hf_config), engine_config)


def build_rollout(config: RunConfig, actor: ActorRole) -> tuple[InferenceEngine, WeightSync]:
    """This worker's rollout engine, holding the actor's current weights, and the sync that keeps it so."""
    if not isinstance(actor.engine, FSDPEngine):
        raise TrainerError(
            f"the built-in rollout copies an FSDPEngine's model config; the actor runs a {actor.engine!r}"
        )
    engine = build_rollout_engine(config, actor.engine.hf_config)
    return engine, local_weight_sync(engine, engine.config.dtype)


def local_weight_sync(engine: InferenceEngine, dtype: str) -> WeightSync:
    """A sync of tensors into `engine` in this process, cast to `dtype` and verified by checksum. The engine's calls
    run on this thread when it bounds its own waits (the "bounded_calls" capability)."""
    inline = "bounded_calls" in engine.capabilities
    config = WeightSyncConfig(pause_mode="wait", dtype=dtype, inline_calls=inline)
    return WeightSync([engine], ReferenceTransport(), config)
