"""Frozen settings of the training engine: `TrainEngineConfig`, which composes the model part
(`_config_model.py`), the optimiser and schedule (`_config_optim.py`) and the engine's own: precision,
micro-batching, offload, device and data parallelism."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rl_engines.training._config_checks import check_bool, invalid
from rl_engines.training._config_model import ModelConfig
from rl_engines.training._config_optim import OptimizerConfig, ScheduleConfig
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

DEFAULT_MAX_TOKENS_PER_MICRO_BATCH = 8192
DEFAULT_LOGPROB_CHUNK_SIZE = 1024
"""Rows of hidden states projected onto the vocabulary at once (rl_core.logprobs' default)."""


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
                raise invalid(
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
            raise invalid(
                "MicroBatchConfig",
                "packing",
                f"True, False or {PACKING_AUTO!r}",
                self.packing,
                message=f"MicroBatchConfig.packing must be True, False or {PACKING_AUTO!r}, got {self.packing!r}",
            )
        check_bool("MicroBatchConfig", "share_prefixes", self.share_prefixes)
        for name in ("max_tokens_per_micro_batch", "logprob_chunk_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise invalid("MicroBatchConfig", name, "an int > 0", value)


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
            raise invalid(
                "TrainEngineConfig",
                "device",
                "'auto', 'cpu' or 'cuda'",
                self.device,
                message=f"TrainEngineConfig.device must be 'auto', 'cpu' or 'cuda', got {self.device!r}",
            )
        if self.data_parallel not in DATA_PARALLEL_MODES:
            raise invalid(
                "TrainEngineConfig", "data_parallel", f"one of {list(DATA_PARALLEL_MODES)}", self.data_parallel
            )
        check_bool("TrainEngineConfig", "reshard_after_forward", self.reshard_after_forward)
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
