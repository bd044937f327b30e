"""`ActorRendezvous`: the master address shared through a tiny Ray actor, for Ray DAG workers (see `_rendezvous`;
kept apart so that a torchrun rank, which meets through torchrun's own store, never imports Ray)."""

from __future__ import annotations

import asyncio
from typing import Any

import ray

from rl_runtime.planning._errors import RendezvousTimeout
from rl_runtime.planning._rendezvous import RendezvousAddress


@ray.remote(num_cpus=0)  # holds one address: it needs no CPU slot of its own
class RendezvousStore:
    """Ray actor holding the master address once rank 0 has published it."""

    def __init__(self) -> None:
        self._address: tuple[str, int] | None = None
        self._published = asyncio.Event()

    async def publish(self, host: str, port: int) -> None:
        self._address = (host, port)
        self._published.set()

    async def wait(self, timeout_s: float) -> tuple[str, int] | None:
        """The address, or None if it was not published within `timeout_s` seconds."""
        try:
            await asyncio.wait_for(self._published.wait(), timeout_s)
        except asyncio.TimeoutError:
            return None
        return self._address


class ActorRendezvous:
    """The address in a `RendezvousStore` actor; pickles as its actor handle, so pass it to every worker."""

    def __init__(self, store: Any) -> None:
        self.store = store

    @classmethod
    def start(cls) -> ActorRendezvous:
        """Start a fresh store actor (call on the driver, once per run)."""
        return cls(RendezvousStore.remote())

    def publish(self, address: RendezvousAddress) -> None:
        ray.get(self.store.publish.remote(address.host, address.port))

    def wait(self, timeout_s: float) -> RendezvousAddress:
        """The published address; raises `RendezvousTimeout` after `timeout_s` seconds."""
        found = ray.get(self.store.wait.remote(timeout_s))
        if found is None:
            raise RendezvousTimeout(
                f"rank 0 did not publish the master address to the rendezvous actor within {timeout_s:g} s; check "
                "that rank 0 started and was given the same ActorRendezvous"
            )
        return RendezvousAddress(*found)
