"""Trainer-side weight sync: stream the train engine's `(name, tensor)` buckets into rollout engines.

`WeightSync(engines, transport, config).sync(buckets, version)` runs pause -> update -> flush cache ->
set version -> verify (version + exact weights checksum) -> resume. Transports: `DiskTransport`
(safetensors + index + manifest, atomic), `SharedMemoryTransport` (shared-memory / CUDA-IPC handles),
`BroadcastTransport` (a dedicated gloo / NCCL group) and `ReferenceTransport` (in-process, by reference).
A train engine connected to a `WeightPublisher` (a `WeightSync` is one) runs the sync itself on
`update_weights(version)` (`rl_engines.training.TrainEngine.connect_weight_sync`).
"""

from rl_engines.sync._broadcast import BroadcastTransport, free_port
from rl_engines.sync._disk import INDEX_FILE, LATEST_FILE, MANIFEST_FILE, DiskTransport, read_manifest
from rl_engines.sync._errors import SyncConfigError, SyncError, SyncTimeoutError
from rl_engines.sync._publisher import WeightPublisher
from rl_engines.sync._shared_memory import SharedMemoryTransport
from rl_engines.sync._transport import Bucket, ReferenceTransport, SyncContext, WeightTransport
from rl_engines.sync._weight_sync import SyncReport, WeightSync, WeightSyncConfig, as_buckets

__all__ = [
    "INDEX_FILE",
    "LATEST_FILE",
    "MANIFEST_FILE",
    "BroadcastTransport",
    "Bucket",
    "DiskTransport",
    "ReferenceTransport",
    "SharedMemoryTransport",
    "SyncConfigError",
    "SyncContext",
    "SyncError",
    "SyncReport",
    "SyncTimeoutError",
    "WeightPublisher",
    "WeightSync",
    "WeightSyncConfig",
    "WeightTransport",
    "as_buckets",
    "free_port",
    "read_manifest",
]
