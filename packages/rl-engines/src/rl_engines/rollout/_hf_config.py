"""Configuration of `HFEngine`."""

from __future__ import annotations

from dataclasses import dataclass

from rl_engines.rollout._errors import InvalidRequestError
from rl_engines.rollout._types import check_weight_version

_DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_TIMEOUT_S = 600.0
"""Long enough for a multi-GB weight sync to finish while generate calls queue; short enough to not hang."""


@dataclass(frozen=True)
class HFEngineConfig:
    """How `HFEngine` loads and serves a transformers causal LM."""

    model_path: str | None = None
    """A local HF checkpoint directory (`from_config` loads it); None when the model is passed in."""
    dtype: str = "float32"
    device: str = "cpu"
    context_len: int | None = None
    """Prompt plus output tokens per request; default: the model's `max_position_embeddings`."""
    max_batch_size: int = 256
    """Requests per forward batch; longer request lists run as consecutive batches."""
    prefill_cache_size: int = 0
    """How many recent prefills (keyed by their batch of prompts) to keep for reuse; 0 disables the cache."""
    admission_timeout_s: float = DEFAULT_TIMEOUT_S
    """How long a generate call waits while the engine is paused or updating, or stays parked."""
    drain_timeout_s: float = DEFAULT_TIMEOUT_S
    """How long updates, sleep and pause wait for in-flight requests to finish or park."""
    initial_version: int = 0
    """Policy version of the weights loaded at start."""
    seed: int | None = None
    """Seeds the generator shared by requests without their own seed; None draws a random seed."""
    eos_token_ids: tuple[int, ...] | None = None
    """Tokens that end a request unless it sets `ignore_eos`; default: the model's generation config."""
    pad_token_id: int | None = None
    attn_implementation: str | None = None
    fast_decode: bool = True
    """Run decode steps of Llama, Qwen2, Qwen3 and (full-attention) Mistral models through the engine's own
    functional step (`FastDecoder`) instead of transformers' forward: the same function with less overhead per
    step. Other models, and False, decode through transformers."""

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise InvalidRequestError(f"HFEngineConfig.dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise InvalidRequestError(f"HFEngineConfig.device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        if self.context_len is not None and self.context_len < 2:
            raise InvalidRequestError(f"HFEngineConfig.context_len must be >= 2, got {self.context_len}")
        if self.max_batch_size < 1:
            raise InvalidRequestError(f"HFEngineConfig.max_batch_size must be >= 1, got {self.max_batch_size}")
        if self.prefill_cache_size < 0:
            raise InvalidRequestError(f"HFEngineConfig.prefill_cache_size must be >= 0, got {self.prefill_cache_size}")
        for name in ("admission_timeout_s", "drain_timeout_s"):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"HFEngineConfig.{name} must be > 0, got {getattr(self, name)!r}")
        check_weight_version(self.initial_version, "HFEngineConfig.initial_version")
        if self.eos_token_ids is not None:
            object.__setattr__(self, "eos_token_ids", tuple(int(t) for t in self.eos_token_ids))
