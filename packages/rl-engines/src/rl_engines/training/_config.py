"""Frozen settings of the training engine: model source, precision, optimizer, schedule, micro-batching, offload."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

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


def _check_positive(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise TrainConfigError(f"{owner}.{name} must be a finite number > 0, got {value!r}")


def _check_non_negative(owner: str, name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not math.isfinite(value):
        raise TrainConfigError(f"{owner}.{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Where the model comes from and how it is built.

    Attributes:
        path: a local Hugging Face folder (config.json plus *.safetensors or pytorch_model*.bin).
        hf_config: a `transformers.PretrainedConfig`; the model is initialised from it with `init_seed`.
            Exactly one of `path` and `hf_config` is set.
        tokenizer_path: folder of the tokenizer to check the vocabulary against; defaults to `path`
            when that folder holds tokenizer files. None with `hf_config` skips the check.
        attn_implementation: the transformers attention implementation ("sdpa", "eager", "flash_attention_2", ...).
        gradient_checkpointing: recompute each decoder layer's activations in backward (activation checkpointing).
        fast_forward: compute a Llama-family decoder (llama, qwen2, qwen3, mistral) with the engine's own functional
            forward instead of transformers' where the model is whole on each rank (not FSDP2-sharded), uses SDPA
            attention and no activation checkpointing; same outputs and gradients, less overhead for small
            models. Any other model runs through transformers either way.
        value_head: add a `(hidden, 1)` value head (the critic) and drop the LM head's training.
        init_seed: seed of the random initialisation from `hf_config` (identical on every rank).
        broadcast_from_rank0: in a sharded run, only rank 0 reads (or initialises) the full weights; the other
            ranks build the model on the meta device and receive their shards from rank 0, so they never hold
            the full model (rank 0 holds it beside its shards). It costs one transfer of the model, so it is
            opt-in: turn it on when host memory, not start-up time, is short (many ranks per node, large
            models). False builds the full model on every rank.
    """

    path: str | None = None
    hf_config: Any = None
    tokenizer_path: str | None = None
    attn_implementation: str = "sdpa"
    gradient_checkpointing: bool = False
    fast_forward: bool = True
    value_head: bool = False
    init_seed: int = 0
    broadcast_from_rank0: bool = False

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hf_config is None):
            raise TrainConfigError(
                "ModelConfig needs exactly one of path (a local Hugging Face folder) and hf_config "
                f"(a transformers config); got path={self.path!r}, hf_config={type(self.hf_config).__name__}"
            )
        if self.hf_config is not None and not hasattr(self.hf_config, "to_dict"):
            raise TrainConfigError(
                f"ModelConfig.hf_config must be a transformers PretrainedConfig, got {type(self.hf_config).__name__}"
            )
        if not self.attn_implementation:
            raise TrainConfigError("ModelConfig.attn_implementation must name an attention implementation, e.g. 'sdpa'")
        if not isinstance(self.fast_forward, bool):
            raise TrainConfigError(f"ModelConfig.fast_forward must be True or False, got {self.fast_forward!r}")


@dataclass(frozen=True)
class PrecisionConfig:
    """Dtypes of the stored (master) parameters, of the forward/backward compute and of gradient reduction.

    Attributes:
        param_dtype: dtype the sharded parameters and optimizer states are kept in.
        compute_dtype: dtype of the unsharded parameters during forward/backward (FSDP2 mixed precision);
            None means `param_dtype`.
        reduce_dtype: dtype gradients are reduced across ranks in.
    """

    param_dtype: str = "float32"
    compute_dtype: str | None = None
    reduce_dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("param_dtype", "compute_dtype", "reduce_dtype"):
            value = getattr(self, name)
            if value is not None and value not in DTYPES:
                raise TrainConfigError(f"PrecisionConfig.{name}={value!r} is not one of {sorted(DTYPES)}")

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
    """AdamW and gradient clipping.

    Attributes:
        lr: peak learning rate.
        betas: AdamW's (beta1, beta2).
        eps: AdamW's epsilon.
        weight_decay: decoupled weight decay.
        max_grad_norm: clip the global gradient norm to this; None disables clipping (the norm is still reported).
    """

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0

    def __post_init__(self) -> None:
        _check_positive("OptimizerConfig", "lr", self.lr)
        _check_positive("OptimizerConfig", "eps", self.eps)
        _check_non_negative("OptimizerConfig", "weight_decay", self.weight_decay)
        if len(self.betas) != 2 or not all(0 <= beta < 1 for beta in self.betas):
            raise TrainConfigError(f"OptimizerConfig.betas must be two numbers in [0, 1), got {self.betas!r}")
        if self.max_grad_norm is not None:
            _check_positive("OptimizerConfig", "max_grad_norm", self.max_grad_norm)


@dataclass(frozen=True)
class ScheduleConfig:
    """Learning-rate schedule: linear warm-up, then constant or cosine decay to `min_lr_ratio * lr`.

    The schedule advances once per `TrainEngine.step_lr_scheduler()` call (once per RL step, as verl).

    Attributes:
        kind: "constant" or "cosine".
        warmup_steps: steps of linear warm-up from 0 to the peak rate.
        total_steps: length of the schedule (warm-up included); required by "cosine".
        min_lr_ratio: the cosine floor as a fraction of the peak rate.
    """

    kind: str = "constant"
    warmup_steps: int = 0
    total_steps: int | None = None
    min_lr_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise TrainConfigError(f"ScheduleConfig.kind={self.kind!r} is not one of {list(SCHEDULES)}")
        if self.warmup_steps < 0:
            raise TrainConfigError(f"ScheduleConfig.warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise TrainConfigError(f"ScheduleConfig.min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}")
        if self.kind == "cosine" and (self.total_steps is None or self.total_steps <= self.warmup_steps):
            raise TrainConfigError(
                f"ScheduleConfig(kind='cosine') needs total_steps > warmup_steps={self.warmup_steps}, "
                f"got total_steps={self.total_steps}"
            )


@dataclass(frozen=True)
class MicroBatchConfig:
    """How the engine runs the micro-batches the caller planned.

    Attributes:
        max_tokens_per_micro_batch: the token budget a micro-batch of several sequences may not exceed
            (a single longer sequence runs alone).
        packing: concatenate a micro-batch's sequences into one row without padding (position ids restart
            per sequence); False runs the padded rows; "auto" packs only under a varlen attention kernel
            (`VARLEN_ATTENTION`), where packing saves the padding's work instead of adding a quadratic mask.
        logprob_chunk_size: rows of hidden states projected onto the vocabulary at once.
        share_prefixes: with padded rows, run a prefix that several rows of a micro-batch share (a GRPO group's
            prompt) once, its KV cache serving each row's continuation: the same outputs and gradients up to
            floating-point order, for less work. Applies to models whose layers all attend to the whole context,
            without gradient checkpointing; otherwise, or set False, the rows run padded. Under FSDP2 the two
            forwards gather each layer twice: where gathers dominate (short prompts, large sharded models), off
            may be faster.
    """

    max_tokens_per_micro_batch: int = DEFAULT_MAX_TOKENS_PER_MICRO_BATCH
    packing: bool | str = PACKING_AUTO
    logprob_chunk_size: int = DEFAULT_LOGPROB_CHUNK_SIZE
    share_prefixes: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.packing, bool) and self.packing != PACKING_AUTO:
            raise TrainConfigError(
                f"MicroBatchConfig.packing must be True, False or {PACKING_AUTO!r}, got {self.packing!r}"
            )
        if not isinstance(self.share_prefixes, bool):
            raise TrainConfigError(
                f"MicroBatchConfig.share_prefixes must be True or False, got {self.share_prefixes!r}"
            )
        for name in ("max_tokens_per_micro_batch", "logprob_chunk_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainConfigError(f"MicroBatchConfig.{name} must be an int > 0, got {value!r}")


@dataclass(frozen=True)
class OffloadConfig:
    """CPU offload.

    Attributes:
        fsdp_cpu_offload: keep sharded parameters, gradients and optimizer states on the CPU and step
            the optimizer there (FSDP2's CPUOffloadPolicy); needs a CUDA device.
        pin_memory: pin the offloaded memory for faster host-device copies.
    """

    fsdp_cpu_offload: bool = False
    pin_memory: bool = True


@dataclass(frozen=True)
class TrainEngineConfig:
    """Everything `FSDPEngine.from_config` needs.

    Attributes:
        model: the model source.
        precision: parameter, compute and reduction dtypes.
        optimizer: AdamW settings; None builds a frozen, forward-only engine (the reference model).
        schedule: learning-rate schedule.
        micro_batch: token budget, packing and log-prob chunking.
        offload: CPU offload.
        device: "auto" (the current CUDA device if there is one, else CPU), "cpu" or "cuda".
        reshard_after_forward: free each layer's gathered parameters after its forward (less memory,
            one more all-gather in backward).
        data_parallel: how the ranks of the process group share the model. "fsdp" (FSDP2) shards parameters,
            gradients and optimizer state: per-layer all-gathers and reduce-scatters, the least memory per rank.
            "ddp" keeps the whole model and optimizer state on every rank and sums the gradients with one
            all-reduce per bucket after the backward: a few large collectives instead of several per layer, for
            models that fit on one device with their optimizer state (on CPU and for small models the per-layer
            collectives of FSDP2 dominate a step). No effect without a process group.
    """

    model: ModelConfig
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    optimizer: OptimizerConfig | None = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    micro_batch: MicroBatchConfig = field(default_factory=MicroBatchConfig)
    offload: OffloadConfig = field(default_factory=OffloadConfig)
    device: str = "auto"
    reshard_after_forward: bool = True
    data_parallel: str = DATA_PARALLEL_FSDP

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            raise TrainConfigError(f"TrainEngineConfig.device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")
        if self.data_parallel not in DATA_PARALLEL_MODES:
            raise TrainConfigError(
                f"TrainEngineConfig.data_parallel must be one of {list(DATA_PARALLEL_MODES)}, "
                f"got {self.data_parallel!r}"
            )
        if self.data_parallel == DATA_PARALLEL_DDP and self.offload.fsdp_cpu_offload:
            raise TrainConfigError(
                "OffloadConfig.fsdp_cpu_offload=True offloads FSDP2 shards, but TrainEngineConfig.data_parallel='ddp' "
                "keeps whole replicas; use data_parallel='fsdp' or turn the offload off"
            )
        if self.micro_batch.packing is True and self.model.attn_implementation not in PACKING_ATTENTION:
            raise TrainConfigError(
                f"MicroBatchConfig.packing=True needs an attention implementation that separates packed sequences "
                f"by position ids ({sorted(PACKING_ATTENTION)}), got ModelConfig.attn_implementation="
                f"{self.model.attn_implementation!r}; set packing=False to run padded rows"
            )

    @property
    def packing(self) -> bool:
        """Whether micro-batches run packed: `micro_batch.packing`, with "auto" resolved by the attention kernel."""
        if self.micro_batch.packing == PACKING_AUTO:
            return self.model.attn_implementation in VARLEN_ATTENTION
        return bool(self.micro_batch.packing)
