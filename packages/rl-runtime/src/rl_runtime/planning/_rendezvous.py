"""Agreeing on the torch.distributed master address: rank 0 picks a free port and shares it.

Rank 0 asks the OS for a free port on its host and publishes `host:port` through an exchange: a tiny Ray
actor (`ActorRendezvous` in `_ray_rendezvous`, for Ray workers) or a file (`FileRendezvous`, for processes that
share a disk). The others wait for it with a timeout. Between picking the port and rank 0's TCP store binding it another
process could take it; the window is milliseconds, and a failed bind surfaces as torch's own error.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Protocol

import attrs

from rl_runtime.planning._errors import RendezvousTimeout

LOCALHOST = "127.0.0.1"
"""Master address of a single-machine run; a multi-machine run passes rank 0's node address."""

_POLL_S = 0.05
"""How often a file waiter looks for the address: cheap, and small next to process start-up."""


@attrs.frozen
class RendezvousAddress:
    """Where rank 0's TCP store listens."""

    host: str
    port: int

    @property
    def init_method(self) -> str:
        """The `init_method` URL for `torch.distributed.init_process_group`."""
        return f"tcp://{self.host}:{self.port}"


class Exchange(Protocol):
    """Where rank 0 publishes the address and the other ranks read it."""

    def publish(self, address: RendezvousAddress) -> None: ...

    def wait(self, timeout_s: float) -> RendezvousAddress: ...


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def rendezvous(rank: int, exchange: Exchange, *, host: str = LOCALHOST, timeout_s: float) -> RendezvousAddress:
    """Rank 0 picks a free port on `host` and publishes it; every rank returns the published address."""
    if rank == 0:
        address = RendezvousAddress(host, free_port(host))
        exchange.publish(address)
        return address
    return exchange.wait(timeout_s)


class FileRendezvous:
    """The address in a JSON file; use a fresh path per run (a stale file would point at a dead master)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def publish(self, address: RendezvousAddress) -> None:
        """Write the address atomically, so a waiter never reads half a file."""
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"host": address.host, "port": address.port}))
        os.replace(partial, self.path)

    def wait(self, timeout_s: float) -> RendezvousAddress:
        """Poll until the file exists; raises `RendezvousTimeout` after `timeout_s` seconds."""
        deadline = time.monotonic() + timeout_s
        while not self.path.exists():
            if time.monotonic() >= deadline:
                raise RendezvousTimeout(
                    f"rank 0 did not publish the master address in {self.path} within {timeout_s:g} s; check that "
                    "rank 0 started and uses the same path"
                )
            time.sleep(_POLL_S)
        data = json.loads(self.path.read_text())
        return RendezvousAddress(data["host"], int(data["port"]))
