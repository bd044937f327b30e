"""Configuration of `RemoteEngine`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

from rl_engines.rollout import InvalidRequestError

DEFAULT_TIMEOUT_S = 600.0
"""Weight updates and drains of a large model take minutes; longer than that means the server is stuck."""
DEFAULT_GENERATE_TIMEOUT_S = 3600.0
"""A long generation (thousands of tokens under load) may take this long; it must still end eventually."""
API_KEY_ENV = "RL_ENGINES_API_KEY"
"""Environment variable holding a rollout server's API key: the server's `--api-key` default, and what the
trainer's "server" engine sends when its config names no key."""


def resolve_api_key(given: str | None) -> str | None:
    """`given`, else the `RL_ENGINES_API_KEY` environment variable, else None; empty strings count as none."""
    key = given if given is not None else os.environ.get(API_KEY_ENV)
    return key or None


SGLANG_CAPABILITIES = frozenset(
    {"disk", "tensor", "distributed", "sleep", "pause", "abort", "prefix_cache", "seed", "stream"}
)
"""What a real SGLang server supports, assumed when `/model_info` does not list capabilities."""


@dataclass(frozen=True)
class RemoteEngineConfig:
    """Where the server is and how long each kind of call may take (seconds)."""

    base_url: str
    """`http://host:port` of a server speaking SGLang's native protocol (ours or SGLang itself)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Bound on control and weight-update calls (pause drains, updates, flushes)."""
    generate_timeout_s: float = DEFAULT_GENERATE_TIMEOUT_S
    update_timeout_s: float = DEFAULT_TIMEOUT_S
    """Bound on one weight-update call (one bucket of tensors, a disk load, one broadcast bucket's receive): a server
    that dies or hangs mid-update fails the call after this long instead of holding the trainer."""
    connect_timeout_s: float = 10.0
    health_timeout_s: float = 5.0
    tp_size: int = 1
    """Tensor-parallel ranks of the server: `update_weights_from_tensor` sends one handle payload per rank."""
    capabilities: frozenset[str] | None = None
    """Override the capabilities read from `/model_info` (None: use the server's, or SGLang's defaults)."""
    incremental_stream: bool = False
    """The server streams deltas (SGLang `--incremental-streaming-output`) instead of cumulative outputs."""
    flush_retry_s: float = 0.2
    """SGLang refuses `/flush_cache` (400) while requests remain; retry this often until `timeout_s`."""
    max_connections: int = 256
    """Concurrent HTTP connections; each in-flight generate call holds one."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer <key>` on every call (the server's `--api-key`, SGLang's too)."""

    def __post_init__(self) -> None:
        parsed = urlparse(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidRequestError(
                f"RemoteEngineConfig.base_url must look like http://host:port, got {self.base_url!r}"
            )
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        for name in (
            "timeout_s",
            "generate_timeout_s",
            "update_timeout_s",
            "connect_timeout_s",
            "health_timeout_s",
            "flush_retry_s",
        ):
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"RemoteEngineConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if self.tp_size < 1:
            raise InvalidRequestError(f"RemoteEngineConfig.tp_size must be >= 1, got {self.tp_size}")
        if self.max_connections < 1:
            raise InvalidRequestError(f"RemoteEngineConfig.max_connections must be >= 1, got {self.max_connections}")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key):
            raise InvalidRequestError("RemoteEngineConfig.api_key must be a non-empty string or None")
        if self.capabilities is not None:
            object.__setattr__(self, "capabilities", frozenset(self.capabilities))
