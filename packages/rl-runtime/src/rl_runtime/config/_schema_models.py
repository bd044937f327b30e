"""Run-config sections of the models: where each comes from, its optimizer, precision and memory settings."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from rl_runtime.config._errors import ConfigError, ConfigProblem, config_error
from rl_runtime.config._validators import int_at_least, non_empty_str, number_in, of_type, optional

_DEFAULT_LR = 1e-6
_DEFAULT_BETAS = (0.9, 0.999)
_DEFAULT_EPS = 1e-8
_DEFAULT_WEIGHT_DECAY = 0.01
_DEFAULT_GRAD_CLIP = 1.0
_DEFAULT_VALUE_CLIP = 0.5
"""verl's critic `cliprange_value`."""
_HF_MODEL_TYPE_KEY = "model_type"
"""transformers needs `model_type` to pick the config class of a model built from a mapping."""


class DType(enum.Enum):
    """Floating-point precision of a model's forward and backward passes."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


class LRSchedule(enum.Enum):
    """Learning-rate schedule after the linear warm-up."""

    CONSTANT = "constant"
    COSINE = "cosine"


class DataParallel(enum.Enum):
    """How the slots of a training role share its model."""

    FSDP = "fsdp"
    DDP = "ddp"


def _is_fraction(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


def _check_betas(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    numbers = isinstance(value, tuple) and len(value) == 2 and all(_is_fraction(beta) for beta in value)
    if not numbers:
        raise config_error(attribute.name, "two floats in [0, 1) (beta1, beta2)", value)


def _check_model_source(instance: ModelSourceConfig, attribute: attrs.Attribute[Any], value: object) -> None:
    if (instance.path is None) == (value is None):
        expected = "exactly one of path (a Hugging Face model folder) and hf_config (a transformers config mapping)"
        found = f"path={instance.path!r} and hf_config={'a mapping' if value is not None else None}"
        raise ConfigError([ConfigProblem("", expected, found, "set one and remove the other")])
    if value is not None and (not isinstance(value, dict) or _HF_MODEL_TYPE_KEY not in value):
        raise config_error(attribute.name, f"a mapping with a {_HF_MODEL_TYPE_KEY!r} key (e.g. qwen2)", value)


def _check_data_parallel(instance: ActorConfig, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, DataParallel):
        raise config_error(attribute.name, f"one of {[mode.value for mode in DataParallel]}", value)
    if value is not DataParallel.DDP:
        return
    if instance.dtype is not DType.FLOAT32:
        raise config_error(
            "dtype",
            "float32 with data_parallel: ddp (replicas have no mixed precision: parameters stay float32)",
            instance.dtype.value,
            "set dtype: float32, or data_parallel: fsdp for FSDP2 mixed precision",
        )
    if instance.cpu_offload:
        raise config_error(
            "cpu_offload",
            "false with data_parallel: ddp (the offload moves FSDP2 shards)",
            True,
            "set cpu_offload: false, or data_parallel: fsdp",
        )


@attrs.frozen
class ModelSourceConfig:
    """Where a model's weights and architecture come from."""

    path: str | None = attrs.field(default=None, validator=optional(non_empty_str))
    """A local Hugging Face model folder (config.json and weights); exclusive with `hf_config`."""
    hf_config: dict[str, Any] | None = attrs.field(default=None, validator=_check_model_source)
    """A transformers config as a mapping (`model_type` plus its fields): a fresh model is initialised from it."""
    tokenizer_path: str | None = attrs.field(default=None, validator=optional(non_empty_str))
    """The tokenizer's folder; None uses `path` (required when the model comes from `hf_config` and text is used)."""
    attn_implementation: str = attrs.field(default="sdpa", validator=non_empty_str)
    """The transformers attention implementation ("sdpa", "eager", "flash_attention_2", ...)."""
    init_seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Seed of the random initialisation from `hf_config` (the same on every rank)."""


@attrs.frozen
class OptimConfig:
    """AdamW, its learning-rate schedule and gradient clipping."""

    lr: float = attrs.field(default=_DEFAULT_LR, validator=number_in(0, low_open=True))
    """Peak learning rate."""
    betas: tuple[float, float] = attrs.field(default=_DEFAULT_BETAS, validator=_check_betas)
    """AdamW's (beta1, beta2)."""
    eps: float = attrs.field(default=_DEFAULT_EPS, validator=number_in(0, low_open=True))
    """AdamW's epsilon."""
    weight_decay: float = attrs.field(default=_DEFAULT_WEIGHT_DECAY, validator=number_in(0))
    """Decoupled weight decay."""
    warmup_steps: int = attrs.field(default=0, validator=int_at_least(0))
    """Training steps of linear warm-up from 0 to `lr`."""
    schedule: LRSchedule = attrs.field(default=LRSchedule.CONSTANT, validator=of_type(LRSchedule))
    """What follows the warm-up: "constant" or "cosine" decay to `min_lr_ratio * lr` at the last step."""
    min_lr_ratio: float = attrs.field(default=0.0, validator=number_in(0, 1))
    """The cosine schedule's floor as a fraction of `lr`."""
    grad_clip: float | None = attrs.field(default=_DEFAULT_GRAD_CLIP, validator=optional(number_in(0, low_open=True)))
    """Clip the global gradient norm to this; null disables clipping (the norm is still logged)."""


@attrs.frozen
class ActorConfig:
    """The policy being trained (its rollout copy takes its settings from `rollout`)."""

    model: ModelSourceConfig = attrs.field(validator=of_type(ModelSourceConfig))
    """Where the initial policy comes from."""
    optim: OptimConfig = attrs.field(factory=OptimConfig, validator=of_type(OptimConfig))
    """Optimizer, schedule and gradient clipping."""
    dtype: DType = attrs.field(default=DType.BFLOAT16, validator=of_type(DType))
    """Compute precision of forward and backward; parameters and optimizer states stay in float32."""
    activation_checkpointing: bool = attrs.field(default=False, validator=of_type(bool))
    """Recompute each layer's activations in backward (less memory, about a third more compute)."""
    cpu_offload: bool = attrs.field(default=False, validator=of_type(bool))
    """Keep sharded parameters, gradients and optimizer states on the CPU (FSDP2 CPU offload; needs CUDA)."""
    pin_memory: bool = attrs.field(default=True, validator=of_type(bool))
    """Pin offloaded memory for faster host-device copies."""
    data_parallel: DataParallel = attrs.field(default=DataParallel.FSDP, validator=_check_data_parallel)
    """How the slots share the model: "fsdp" shards parameters, gradients and optimizer state (FSDP2: the least
    memory, per-layer collectives); "ddp" keeps a whole float32 replica per slot and sums gradients in one
    all-reduce per bucket (fewer collectives: faster for models that fit a slot with their optimizer state, as
    small models and CPU runs do)."""


@attrs.frozen
class CriticConfig(ActorConfig):
    """The value model (PPO); its model gets a value head."""

    value_clip: float | None = attrs.field(default=_DEFAULT_VALUE_CLIP, validator=optional(number_in(0, low_open=True)))
    """Clip new values to within this of the old ones in the value loss; null disables the clip."""


@attrs.frozen
class ReferenceConfig:
    """The frozen reference policy the KL is measured against."""

    model: ModelSourceConfig | None = attrs.field(default=None, validator=optional(of_type(ModelSourceConfig)))
    """Where the reference model comes from; null uses the actor's initial model."""
    dtype: DType = attrs.field(default=DType.BFLOAT16, validator=of_type(DType))
    """Compute precision of its forward passes."""
    cpu_offload: bool = attrs.field(default=False, validator=of_type(bool))
    """Keep its parameters on the CPU between forward passes (needs CUDA)."""
