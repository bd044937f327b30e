"""Frozen settings of the training engine: model source, precision, optimizer, schedule, micro-batching, offload."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import CONFIG_MAPPING, AutoConfig, PretrainedConfig

from rl_core import nearest_name
from rl_engines.training._errors import TrainConfigError

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""Dtype names accepted by `PrecisionConfig` (strings, so a YAML config can name them)."""

PACKING_ATTENTION = frozenset({"sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3"})
"""Attention implementations that separate packed sequences from `position_ids` alone (checked-facts.md)."""
VARLEN_ATTENTION = frozenset({"flash_attention_2", "flash_attention_3"})
"""Kernels whose packed-row cost is that of its separate sequences. sdpa and eager instead attend over the whole
packed row under a block-diagonal mask, quadratic in the micro-batch's token count: on CPU a packed micro-batch of
64 sequences of 36 tokens took 5.5x the padded layout's time (fwd+bwd, 276 vs 50 ms)."""
PACKING_AUTO = "auto"

DATA_PARALLEL_FSDP = "fsdp"
DATA_PARALLEL_DDP = "ddp"
DATA_PARALLEL_MODES = (DATA_PARALLEL_FSDP, DATA_PARALLEL_DDP)
"""How the ranks of a process group share the model (`TrainEngineConfig.data_parallel`)."""

SCHEDULES = ("constant", "cosine")
DEFAULT_MAX_TOKENS_PER_MICRO_BATCH = 8192
DEFAULT_LOGPROB_CHUNK_SIZE = 1024
"""Rows of hidden states projected onto the vocabulary at once (rl_core.logprobs' default)."""
HF_MODEL_TYPE_KEY = "model_type"
"""The key of an `hf_config` mapping that picks the transformers config class (`AutoConfig.for_model`)."""


def _invalid(owner: str, name: str, expected: str, found: object, fix: str = "", message: str = "") -> TrainConfigError:
    """The error of `owner.name` holding `found` instead of `expected` (the message defaults to saying so)."""
    text = message or f"{owner}.{name} must be {expected}, got {found!r}"
    return TrainConfigError(
        f"{text}; {fix}" if fix and not message else text, field=name, expected=expected, found=found, fix=fix
    )


def _check_positive(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise _invalid(owner, name, "a finite number > 0", value)


def _check_non_negative(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not math.isfinite(value):
        raise _invalid(owner, name, "a finite number >= 0", value)


def _check_bool(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _invalid(owner, name, "True or False", value)


@dataclass(frozen=True)
class ModelConfig:
    """Where the model comes from and how it is built (exactly one of `path` and `hf_config`).

    `fast_forward` changes nothing for other model families, which run through transformers either way.
    `broadcast_from_rank0` is opt-in because it costs one transfer of the model: turn it on when host memory, not
    start-up time, is short (many ranks per node, large models).
    """

    path: str | None = None
    """A local Hugging Face model folder (config.json plus *.safetensors or pytorch_model*.bin)."""
    hf_config: Any = None
    """A transformers config to initialise a fresh model from with `init_seed`: a mapping (`model_type` plus the
    config's fields, as YAML writes it) or a `transformers.PretrainedConfig`."""
    tokenizer_path: str | None = None
    """Folder of the tokenizer to check the vocabulary against; null uses `path` when it holds tokenizer files
    (with `hf_config`, null skips the check)."""
    attn_implementation: str = "sdpa"
    """The transformers attention implementation ("sdpa", "eager", "flash_attention_2", ...)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward (less memory, about a third more compute)."""
    fast_forward: bool = True
    """Run a whole-on-each-rank Llama-family decoder (llama, qwen2, qwen3, mistral; SDPA, no activation
    checkpointing) through the engine's own functional forward: the same outputs, less overhead for small models."""
    value_head: bool = False
    """Add a `(hidden, 1)` value head (the critic) and drop the LM head's training."""
    init_seed: int = 0
    """Seed of the random initialisation from `hf_config` (identical on every rank)."""
    broadcast_from_rank0: bool = False
    """Sharded, only rank 0 reads the full weights and sends the others their shards (less host memory, one more
    transfer of the model); false builds the full model on every rank."""

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hf_config is None):
            raise TrainConfigError(
                "ModelConfig needs exactly one of path (a local Hugging Face folder) and hf_config "
                f"(a transformers config); got path={self.path!r}, hf_config={type(self.hf_config).__name__}",
                field="",
                expected="exactly one of path (a Hugging Face model folder) and hf_config (a transformers config)",
                found={"path": self.path, "hf_config": None if self.hf_config is None else "set"},
                fix="set one and remove the other",
            )
        if self.hf_config is not None and not _is_hf_config(self.hf_config):
            found = type(self.hf_config).__name__
            if isinstance(self.hf_config, Mapping):
                found = f"{found} without a {HF_MODEL_TYPE_KEY!r} key"
            raise _invalid(
                "ModelConfig",
                "hf_config",
                f"a transformers PretrainedConfig or a mapping with a {HF_MODEL_TYPE_KEY!r} key (e.g. qwen2)",
                self.hf_config,
                message=f"ModelConfig.hf_config must be a transformers PretrainedConfig or a mapping with a "
                f"{HF_MODEL_TYPE_KEY!r} key, got {found}",
            )
        if isinstance(self.hf_config, Mapping):
            hf_config_from_mapping(self.hf_config)  # refuses, now, a mapping the engine could not build
        if not self.attn_implementation:
            raise _invalid(
                "ModelConfig",
                "attn_implementation",
                "an attention implementation such as 'sdpa'",
                self.attn_implementation,
                message="ModelConfig.attn_implementation must name an attention implementation, e.g. 'sdpa'",
            )
        for name in ("gradient_checkpointing", "fast_forward", "value_head", "broadcast_from_rank0"):
            _check_bool("ModelConfig", name, getattr(self, name))


def _check_model_type(model_type: str) -> None:
    """Refuse a `model_type` transformers has no config class for, before any engine is built."""
    if model_type in CONFIG_MAPPING:
        return
    near = nearest_name(model_type, list(CONFIG_MAPPING.keys()))
    raise _invalid(
        "ModelConfig",
        f"hf_config.{HF_MODEL_TYPE_KEY}",
        "a model type transformers knows (AutoConfig.for_model: llama, qwen2, ...)",
        model_type,
        f"did you mean {near!r}?" if near else "check the model's config.json for its model_type",
    )


def hf_config_from_mapping(fields: Mapping[str, Any]) -> PretrainedConfig:
    """The transformers config `AutoConfig.for_model(model_type, **other_fields)` of an `hf_config` mapping.

    Raises:
        TrainConfigError: transformers knows no such `model_type`, or refuses the fields (its message is kept).
    """
    kwargs = copy.deepcopy(dict(fields))
    model_type = kwargs.pop(HF_MODEL_TYPE_KEY)
    _check_model_type(model_type)
    try:
        return AutoConfig.for_model(model_type, **kwargs)
    except Exception as error:  # transformers validates fields with several error types (ValueError, its own)
        detail = " ".join(str(error).split())
        raise _invalid(
            "ModelConfig",
            "hf_config",
            f"fields transformers accepts for model_type {model_type!r}",
            fields,
            f"transformers says: {detail}",
            message=f"ModelConfig.hf_config does not build a transformers config: {detail}",
        ) from None


def _is_hf_config(value: object) -> bool:
    if isinstance(value, Mapping):
        return isinstance(value.get(HF_MODEL_TYPE_KEY), str)
    return hasattr(value, "to_dict")


@dataclass(frozen=True)
class PrecisionConfig:
    """Dtypes of the stored (master) parameters, of the forward/backward compute and of gradient reduction."""

    param_dtype: str = "float32"
    """Dtype the sharded parameters and optimizer states are kept in: "float32", "bfloat16" or "float16"."""
    compute_dtype: str | None = None
    """Dtype of forward and backward (FSDP2 mixed precision, gathered parameters cast to it); null: `param_dtype`."""
    reduce_dtype: str = "float32"
    """Dtype gradients are reduced across ranks in."""

    def __post_init__(self) -> None:
        for name in ("param_dtype", "compute_dtype", "reduce_dtype"):
            value = getattr(self, name)
            if value is not None and value not in DTYPES:
                raise _invalid(
                    "PrecisionConfig",
                    name,
                    f"one of {sorted(DTYPES)}",
                    value,
                    message=f"PrecisionConfig.{name}={value!r} is not one of {sorted(DTYPES)}",
                )

    @property
    def param(self) -> torch.dtype:
        """`param_dtype` as a torch dtype."""
        return DTYPES[self.param_dtype]

    @property
    def compute(self) -> torch.dtype:
        """`compute_dtype` (or `param_dtype`) as a torch dtype."""
        return DTYPES[self.compute_dtype or self.param_dtype]

    @property
    def reduce(self) -> torch.dtype:
        """`reduce_dtype` as a torch dtype."""
        return DTYPES[self.reduce_dtype]


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW and gradient clipping."""

    lr: float = 1e-6
    """Peak learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's (beta1, beta2)."""
    eps: float = 1e-8
    """AdamW's epsilon."""
    weight_decay: float = 0.01
    """Decoupled weight decay."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; null disables clipping (the norm is still reported)."""

    def __post_init__(self) -> None:
        _check_positive("OptimizerConfig", "lr", self.lr)
        _check_positive("OptimizerConfig", "eps", self.eps)
        _check_non_negative("OptimizerConfig", "weight_decay", self.weight_decay)
        if len(self.betas) != 2 or not all(0 <= beta < 1 for beta in self.betas):
            raise _invalid(
                "OptimizerConfig",
                "betas",
                "two numbers in [0, 1) (beta1, beta2)",
                self.betas,
                message=f"OptimizerConfig.betas must be two numbers in [0, 1), got {self.betas!r}",
            )
        if self.max_grad_norm is not None:
            _check_positive("OptimizerConfig", "max_grad_norm", self.max_grad_norm)


@dataclass(frozen=True)
class ScheduleConfig:
    """Learning-rate schedule: linear warm-up, then constant or cosine decay to `min_lr_ratio * lr`.

    The schedule advances once per `TrainEngine.step_lr_scheduler()` call (once per RL step, as verl).
    """

    kind: str = "constant"
    """What follows the warm-up: "constant", or "cosine" decay to `min_lr_ratio * lr` at `total_steps`."""
    warmup_steps: int = 0
    """Steps of linear warm-up from 0 to the peak rate."""
    total_steps: int | None = None
    """Length of the schedule (warm-up included), needed by "cosine" when the engine is built; a trainer may
    fill in its run's length (null in a run config: the run's training steps)."""
    min_lr_ratio: float = 0.0
    """The cosine floor as a fraction of the peak rate."""

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise _invalid(
                "ScheduleConfig",
                "kind",
                f"one of {list(SCHEDULES)}",
                self.kind,
                message=f"ScheduleConfig.kind={self.kind!r} is not one of {list(SCHEDULES)}",
            )
        if self.warmup_steps < 0:
            raise _invalid("ScheduleConfig", "warmup_steps", ">= 0", self.warmup_steps)
        if not 0 <= self.min_lr_ratio <= 1:
            raise _invalid(
                "ScheduleConfig",
                "min_lr_ratio",
                "a number in [0, 1]",
                self.min_lr_ratio,
                message=f"ScheduleConfig.min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}",
            )
        if self.kind == "cosine" and self.total_steps is not None and self.total_steps <= self.warmup_steps:
            raise _invalid(
                "ScheduleConfig",
                "total_steps",
                f"> warmup_steps={self.warmup_steps}",
                self.total_steps,
                message=f"ScheduleConfig(kind='cosine') needs total_steps > warmup_steps={self.warmup_steps}, "
                f"got total_steps={self.total_steps}",
            )

    def require_length(self) -> None:
        """Raise `TrainConfigError` when a cosine schedule does not know its length yet (`total_steps` None)."""
        if self.kind == "cosine" and self.total_steps is None:
            raise _invalid(
                "ScheduleConfig",
                "total_steps",
                f"an int > warmup_steps={self.warmup_steps} for kind='cosine'",
                None,
                message=f"ScheduleConfig(kind='cosine') needs total_steps > warmup_steps={self.warmup_steps}, "
                "got total_steps=None",
            )


@dataclass(frozen=True)
class MicroBatchConfig:
    """How the engine runs the micro-batches the caller planned."""

    max_tokens_per_micro_batch: int = DEFAULT_MAX_TOKENS_PER_MICRO_BATCH
    """Token budget of one forward/backward on one rank: a micro-batch of several sequences may not exceed it (a
    single longer sequence runs alone) (verl `ppo_max_token_len_per_gpu`)."""
    packing: bool | str = PACKING_AUTO
    """Concatenate a micro-batch's sequences into one unpadded row; false runs padded rows; "auto" packs only under
    a varlen attention kernel (flash_attention_2/3), where packing saves work instead of adding a quadratic mask."""
    logprob_chunk_size: int = DEFAULT_LOGPROB_CHUNK_SIZE
    """Rows of hidden states projected onto the vocabulary at once."""
    share_prefixes: bool = True
    """With padded rows, run a prompt shared by several rows (a GRPO group's) once and reuse its KV cache: the same
    outputs for less work (full-attention models without gradient checkpointing; under FSDP2 each layer is
    gathered twice, so with short prompts on large sharded models false may be faster)."""

    def __post_init__(self) -> None:
        if not isinstance(self.packing, bool) and self.packing != PACKING_AUTO:
            raise _invalid(
                "MicroBatchConfig",
                "packing",
                f"True, False or {PACKING_AUTO!r}",
                self.packing,
                message=f"MicroBatchConfig.packing must be True, False or {PACKING_AUTO!r}, got {self.packing!r}",
            )
        _check_bool("MicroBatchConfig", "share_prefixes", self.share_prefixes)
        for name in ("max_tokens_per_micro_batch", "logprob_chunk_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise _invalid("MicroBatchConfig", name, "an int > 0", value)


@dataclass(frozen=True)
class OffloadConfig:
    """CPU offload."""

    fsdp_cpu_offload: bool = False
    """Keep sharded parameters, gradients and optimizer states on the CPU and step the optimizer there (FSDP2's
    CPUOffloadPolicy); needs a CUDA device."""
    pin_memory: bool = True
    """Pin the offloaded memory for faster host-device copies."""


@dataclass(frozen=True)
class TrainEngineConfig:
    """Everything `FSDPEngine.from_config` needs."""

    model: ModelConfig
    """Where the model comes from and how it is built."""
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    """Parameter, compute and reduction dtypes."""
    optimizer: OptimizerConfig | None = field(default_factory=OptimizerConfig)
    """AdamW settings; null builds a frozen, forward-only engine (a reference model)."""
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    """Learning-rate schedule."""
    micro_batch: MicroBatchConfig = field(default_factory=MicroBatchConfig)
    """Token budget, packing and log-prob chunking."""
    offload: OffloadConfig = field(default_factory=OffloadConfig)
    """CPU offload."""
    device: str = "auto"
    """"auto" (the current CUDA device if there is one, else CPU), "cpu" or "cuda"."""
    reshard_after_forward: bool = True
    """Free each layer's gathered parameters after its forward (less memory, one more all-gather in backward)."""
    data_parallel: str = DATA_PARALLEL_FSDP
    """How the ranks share the model: "fsdp" shards it (FSDP2: least memory, per-layer collectives); "ddp" keeps a
    whole replica per rank in `param_dtype` and all-reduces gradients once a step (faster where the model and its
    optimizer state fit a rank: small models, CPU runs)."""

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            raise _invalid(
                "TrainEngineConfig",
                "device",
                "'auto', 'cpu' or 'cuda'",
                self.device,
                message=f"TrainEngineConfig.device must be 'auto', 'cpu' or 'cuda', got {self.device!r}",
            )
        if self.data_parallel not in DATA_PARALLEL_MODES:
            raise _invalid(
                "TrainEngineConfig", "data_parallel", f"one of {list(DATA_PARALLEL_MODES)}", self.data_parallel
            )
        _check_bool("TrainEngineConfig", "reshard_after_forward", self.reshard_after_forward)
        if self.data_parallel == DATA_PARALLEL_DDP:
            self._check_replicas()
        if self.micro_batch.packing is True and self.model.attn_implementation not in PACKING_ATTENTION:
            raise TrainConfigError(
                f"MicroBatchConfig.packing=True needs an attention implementation that separates packed sequences "
                f"by position ids ({sorted(PACKING_ATTENTION)}), got ModelConfig.attn_implementation="
                f"{self.model.attn_implementation!r}; set packing=False to run padded rows",
                field="micro_batch.packing",
                expected=f"False with model.attn_implementation={self.model.attn_implementation!r} (packing needs "
                f"one of {sorted(PACKING_ATTENTION)})",
                found=True,
                fix="set packing to false or 'auto', or use an attention implementation that packs",
            )

    def _check_replicas(self) -> None:
        """ddp keeps whole replicas: no FSDP2 offload and no mixed precision."""
        if self.offload.fsdp_cpu_offload:
            raise TrainConfigError(
                "OffloadConfig.fsdp_cpu_offload=True offloads FSDP2 shards, but TrainEngineConfig.data_parallel='ddp' "
                "keeps whole replicas; use data_parallel='fsdp' or turn the offload off",
                field="offload.fsdp_cpu_offload",
                expected="false with data_parallel='ddp' (the offload moves FSDP2 shards)",
                found=True,
                fix="turn the offload off, or set data_parallel: fsdp",
            )
        precision = self.precision
        if precision.compute != precision.param:
            raise TrainConfigError(
                f"PrecisionConfig.compute_dtype={precision.compute_dtype!r} differs from param_dtype="
                f"{precision.param_dtype!r}, but TrainEngineConfig.data_parallel='ddp' replicas have no mixed "
                "precision; set compute_dtype=None (or equal to param_dtype), or data_parallel='fsdp'",
                field="precision.compute_dtype",
                expected=f"null or {precision.param_dtype!r} with data_parallel='ddp' (replicas have no mixed "
                "precision: they compute in param_dtype)",
                found=precision.compute_dtype,
                fix="remove compute_dtype (or set param_dtype to the dtype wanted), or set data_parallel: fsdp for "
                "FSDP2 mixed precision",
            )

    @property
    def packing(self) -> bool:
        """Whether micro-batches run packed: `micro_batch.packing`, with "auto" resolved by the attention kernel."""
        if self.micro_batch.packing == PACKING_AUTO:
            return self.model.attn_implementation in VARLEN_ATTENTION
        return bool(self.micro_batch.packing)
