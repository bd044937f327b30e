"""The "server" rollout engine's builder: a `ServerFleet` of rollout servers, started here or already running.

With no `RolloutEngineSpec.servers`, the builder starts one of our rollout servers (`LocalServer`) on 127.0.0.1
for this trainer worker; with addresses, it connects to those (an external fleet), retrying each
`connect_attempts` times. Settings come from the run config's `rollout.engine_kwargs` (`ServerEngineConfig`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rl_engines.remote._config import DEFAULT_GENERATE_TIMEOUT_S, DEFAULT_TIMEOUT_S, RemoteEngineConfig, resolve_api_key
from rl_engines.remote._engine import RemoteEngine
from rl_engines.remote._errors import ServerConnectionError
from rl_engines.remote._fleet import ServerFleet
from rl_engines.remote._launch import LocalServer
from rl_engines.rollout import EngineTimeoutError, InvalidRequestError, RolloutEngineSpec


@dataclass(frozen=True)
class ServerEngineConfig:
    """How the "server" engine reaches its servers (`rollout.engine_kwargs` of a run config)."""

    connect_attempts: int = 5
    """Tries to reach each server at start before giving up with an error naming its address."""
    retry_backoff_s: float = 1.0
    """Wait between those tries."""
    start_timeout_s: float = 300.0
    """How long a server started here may take to answer `/health` (it imports torch and builds the model)."""
    request_retries: int = 2
    """Times a generate call re-deals the requests of an unreachable server to the others."""
    health_interval_s: float = 5.0
    """How soon a server found unreachable is probed again."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Bound on control calls: pause drains, flushes, versions, checksums (`RemoteEngineConfig.timeout_s`)."""
    update_timeout_s: float = DEFAULT_TIMEOUT_S
    """Bound on one weight-update call (`RemoteEngineConfig.update_timeout_s`): a server that dies or hangs during an
    update is dropped from it after this long at most, and the others complete it."""
    generate_timeout_s: float = DEFAULT_GENERATE_TIMEOUT_S
    """Bound on one generate call (`RemoteEngineConfig.generate_timeout_s`)."""
    api_key: str | None = dataclasses.field(default=None, repr=False)
    """The servers' `--api-key`; None reads `RL_ENGINES_API_KEY` (servers started here inherit that variable and
    so require it too). Prefer the variable: a key in a run config is written into the run folder's config."""

    def __post_init__(self) -> None:
        if self.connect_attempts < 1:
            raise InvalidRequestError(
                f"ServerEngineConfig.connect_attempts must be >= 1, got {self.connect_attempts!r}"
            )
        if self.request_retries < 0:
            raise InvalidRequestError(f"ServerEngineConfig.request_retries must be >= 0, got {self.request_retries!r}")
        for name in (
            "retry_backoff_s", "start_timeout_s", "health_interval_s", "timeout_s", "generate_timeout_s",
            "update_timeout_s",
        ):  # fmt: skip
            if not getattr(self, name) > 0:
                raise InvalidRequestError(f"ServerEngineConfig.{name} must be > 0, got {getattr(self, name)!r}")


def server_engine_config(spec: RolloutEngineSpec) -> ServerEngineConfig:
    """The spec's `engine_kwargs` as a `ServerEngineConfig`; an unknown key raises naming the valid ones."""
    known = {field.name for field in dataclasses.fields(ServerEngineConfig)}
    unknown = sorted(set(spec.engine_kwargs) - known)
    if unknown:
        raise InvalidRequestError(
            f"rollout engine_kwargs {unknown} are not settings of the server engine; it takes {sorted(known)}"
        )
    return ServerEngineConfig(**spec.engine_kwargs)


def _remote_config(config: ServerEngineConfig, address: str) -> RemoteEngineConfig:
    api_key = config.api_key if config.api_key is not None else resolve_api_key(None)
    return RemoteEngineConfig(
        address,
        timeout_s=config.timeout_s,
        generate_timeout_s=config.generate_timeout_s,
        update_timeout_s=config.update_timeout_s,
        api_key=api_key,
    )


def build_server_fleet(spec: RolloutEngineSpec) -> ServerFleet:
    """A `ServerFleet` over `spec.servers`, or over one server started here on a fresh model of `spec.hf_config`."""
    config = server_engine_config(spec)
    owned: list[LocalServer] = []
    addresses = list(spec.servers)
    if not addresses:
        server = LocalServer.start(
            spec.hf_config,
            dtype=spec.dtype,
            device=spec.device,
            seed=0 if spec.seed is None else spec.seed,
            start_timeout_s=config.start_timeout_s,
        )
        owned.append(server)
        addresses.append(server.url)
    config_for = functools.partial(_remote_config, config)
    try:
        members = [
            connect(config_for, address, attempts=config.connect_attempts, backoff_s=config.retry_backoff_s)
            for address in addresses
        ]
        return ServerFleet(
            members, retries=config.request_retries, health_interval_s=config.health_interval_s, owned=owned
        )
    except BaseException:
        for server in owned:
            server.stop()
        raise


def connect(config_for: Callable[[str], Any], address: str, *, attempts: int, backoff_s: float) -> RemoteEngine:
    """A `RemoteEngine` of the server at `address` (`config_for(address)` its `RemoteEngineConfig`), trying
    `attempts` times `backoff_s` apart; `ServerConnectionError` naming the address when it never answers."""
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            return RemoteEngine(config_for(address))
        except (ServerConnectionError, EngineTimeoutError) as error:
            last = error
            if attempt + 1 < attempts:
                time.sleep(backoff_s)
    raise ServerConnectionError(
        f"rollout server {address} did not answer in {attempts} tries {backoff_s} s apart ({last}); start it, or "
        "fix the address"
    )
