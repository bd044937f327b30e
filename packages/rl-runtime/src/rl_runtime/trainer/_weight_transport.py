"""The weight-sync transport of a worker's rollout engine, as `rollout.weight_sync` chose it (see
rl_runtime.config.weight_sync_transports for which the placement allows), and the engines it addresses.

A "server" engine's `ServerFleet` is synced server by server, through a `FleetWeightSync` (colocated, and on a split
placement's rollout slots): each server has a `WeightSync` of its own, so shared-memory buffers, broadcast groups and
disk folders (`rank_<r>/server_<i>`) are per server and each server's weights are verified on their own; servers
that do not answer are skipped (and reported), those that die or hang during an update dropped from it.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

from rl_engines.rollout import InferenceEngine
from rl_engines.sync import (
    BroadcastTransport,
    DiskTransport,
    ReferenceTransport,
    SharedMemoryTransport,
    WeightPublisher,
    WeightTransport,
)
from rl_runtime.config import RunConfig, WeightSyncKind, resolve_weight_sync
from rl_runtime.config._schema_rollout import SERVER_ENGINE, EngineLocation, engine_location
from rl_runtime.trainer._engines import device_name, local_weight_sync, rollout_dtype

WEIGHT_SYNC_DIR = "weight_sync"
"""Folder under the run's output folder where the disk transport publishes each rollout slot's weights."""
_LOOPBACK = "127.0.0.1"
_PROBE_PORT = 80
_SYNC_MARGIN_S = 30.0
"""A fleet server's sync waits this much beyond the server's own call timeouts, so their error arrives first."""


def sync_targets(config: RunConfig, engine: InferenceEngine) -> list[InferenceEngine]:
    """The engines a `WeightSync` into `engine` addresses: a server fleet's servers, else the engine itself."""
    if config.rollout.engine == SERVER_ENGINE:
        from rl_engines.remote import ServerFleet

        if isinstance(engine, ServerFleet):
            return list(engine.members)
    return [engine]


def publisher_into(
    config: RunConfig, engine: InferenceEngine, rank: int, *, keep_requests: bool = False
) -> WeightPublisher:
    """The weight sync of rollout slot `rank` into its `engine` (`keep_requests`: see `local_weight_sync`): a
    `WeightSync` over `sync_targets`, or, for a server fleet, a `FleetWeightSync` that syncs each server that answers
    through a `WeightSync` of its own (fresh transport) and drops those that die or hang during an update."""
    dtype = rollout_dtype(config)
    if config.rollout.engine == SERVER_ENGINE:
        from rl_engines.remote import FleetWeightSync, ServerFleet

        if isinstance(engine, ServerFleet):
            # each call of a server's sync is bounded by the server's own HTTP timeouts; the sync's bound comes after
            bound = max(max(m.config.timeout_s, m.config.update_timeout_s) for m in engine.members) + _SYNC_MARGIN_S
            return FleetWeightSync(
                engine,
                lambda server, index: local_weight_sync(
                    [server], dtype, weight_transport(config, rank, index), keep_requests=keep_requests, timeout_s=bound
                ),
            )
    transport = weight_transport(config, rank)
    return local_weight_sync(sync_targets(config, engine), dtype, transport, keep_requests=keep_requests)


def _address_towards(address: str) -> str:
    """This host's IP address on the route to the host of `address` (no packet is sent: UDP connect only)."""
    host = urlparse(address).hostname or _LOOPBACK
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, _PROBE_PORT))
        return str(probe.getsockname()[0])


def weight_transport(config: RunConfig, rank: int, server: int | None = None) -> WeightTransport:
    """A fresh transport of the kind `rollout.weight_sync` resolves to, for rollout slot `rank` (and, for one server
    of a fleet synced server by server, that server's index `server`: its own disk folder and weight group)."""
    kind = resolve_weight_sync(config)
    if kind is WeightSyncKind.REFERENCE:
        return ReferenceTransport()
    if kind is WeightSyncKind.SHARED_MEMORY:
        return SharedMemoryTransport()
    if kind is WeightSyncKind.DISK:
        folder = Path(config.trainer.output_dir) / WEIGHT_SYNC_DIR / f"rank_{rank}"
        return DiskTransport(folder if server is None else folder / f"server_{server}", keep_last=1)
    master = _LOOPBACK
    if engine_location(config) is EngineLocation.REMOTE_SERVER:
        master = _address_towards(config.rollout.servers[0])
    backend = "nccl" if device_name(config) == "cuda" else "gloo"
    if server is None:
        return BroadcastTransport(master_address=master, backend=backend, group_name=f"rollout_weights_{rank}")
    from rl_engines.remote import ServerEngineConfig

    # a fleet server's group: a hung server fails its broadcast after update_timeout_s, as its other update calls
    timeout_s = ServerEngineConfig(**config.rollout.engine_kwargs).update_timeout_s
    group = f"rollout_weights_{rank}_{server}"
    return BroadcastTransport(master_address=master, backend=backend, group_name=group, timeout_s=timeout_s)
