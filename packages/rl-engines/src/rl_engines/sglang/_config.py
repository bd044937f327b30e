"""Configuration of `SGLangEngine`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rl_engines.rollout import InvalidRequestError

DEFAULT_TIMEOUT_S = 600.0
"""Bound on flush retries; SGLang's own calls block until the scheduler answers."""


@dataclass(frozen=True)
class SGLangEngineConfig:
    """How `SGLangEngine` builds its `sglang.Engine` (token ids only, no tokenizer)."""

    model_path: str
    dtype: str = "bfloat16"
    tp_size: int = 1
    mem_fraction_static: float = 0.7
    enable_memory_saver: bool = True
    """Needed for `sleep` / `wake_up` (release / resume memory occupation)."""
    initial_version: int = 0
    """Policy version of the weights at start (SGLang holds it as a str; the engine converts)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    flush_retry_s: float = 0.2
    extra_engine_args: Mapping[str, Any] = field(default_factory=dict)
    """More `sglang.Engine` keyword arguments (ServerArgs names); they override the ones set here."""

    def __post_init__(self) -> None:
        if not isinstance(self.model_path, str) or not self.model_path:
            raise InvalidRequestError("SGLangEngineConfig.model_path must be a checkpoint directory")
        if self.tp_size < 1:
            raise InvalidRequestError(f"SGLangEngineConfig.tp_size must be >= 1, got {self.tp_size}")
        for name in ("timeout_s", "flush_retry_s"):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"SGLangEngineConfig.{name} must be > 0, got {getattr(self, name)!r}")
