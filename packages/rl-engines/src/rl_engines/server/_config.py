"""Configuration of the rollout server."""

from __future__ import annotations

from dataclasses import dataclass, field

from rl_engines.rollout import InvalidRequestError
from rl_engines.server._auth import bind_problem

DEFAULT_HOST = "127.0.0.1"
"""Loopback only: the server accepts weight handles and runs collectives, so exposing it is a deliberate act."""
DEFAULT_MAX_REQUEST_BYTES = 64 * 2**20
"""Large enough for a batch of 256 prompts of 16k tokens as JSON; weight payloads are handles, not data."""
DEFAULT_GENERATE_WORKERS = 128
"""Concurrent generate calls; each blocks a thread while it decodes, waits for admission or is parked."""
DEFAULT_CONTROL_WORKERS = 8
"""Threads for control calls, separate from generation so a resume is never stuck behind parked requests."""
DEFAULT_HEALTH_TIMEOUT_S = 20.0
"""`/health_generate` reports 503 if one greedy token takes longer (SGLang's default as well)."""


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and its limits."""

    host: str = DEFAULT_HOST
    port: int = 30000
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    generate_workers: int = DEFAULT_GENERATE_WORKERS
    control_workers: int = DEFAULT_CONTROL_WORKERS
    health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S
    incremental_stream: bool = False
    """Stream only the new tokens of each step (SGLang's `--incremental-streaming-output`); default cumulative."""
    model_path: str | None = None
    """Reported by `/model_info`."""
    api_key: str | None = field(default=None, repr=False)
    """Required as `Authorization: Bearer <key>` on every route but `/health`; None serves without a key."""
    allow_unauthenticated: bool = False
    """Serve off the loopback interface without a key (refused otherwise)."""

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise InvalidRequestError(f"ServerConfig.host must be a host name or IP, got {self.host!r}")
        if not 0 <= self.port < 65536:
            raise InvalidRequestError(f"ServerConfig.port must be in 0..65535, got {self.port}")
        for name in ("max_request_bytes", "generate_workers", "control_workers"):
            if getattr(self, name) < 1:
                raise InvalidRequestError(f"ServerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise InvalidRequestError("ServerConfig.api_key must be a non-empty string or None")
        problem = bind_problem(self.host, self.api_key, self.allow_unauthenticated)
        if problem is not None:
            raise InvalidRequestError(problem)
        if not self.health_timeout_s > 0:
            raise InvalidRequestError(f"ServerConfig.health_timeout_s must be > 0, got {self.health_timeout_s}")
