"""Moving samples between pipeline stages by reference: the DataCoordinator actor, its client, the local path.

Producers `ray.put` each batch once and hand the coordinator only SampleInfo and ObjectRefs; consumers ask
for (edge, step, rank) and fetch their share straight from the producers' objects. When producer and
consumer have the same data-parallel layout and no balancing is asked, the batch stays in the worker
(`LocalEdgeStore`, `use_local_path`).

Ref granularity: one `ray.put` per producer batch, and per sample a (ref, position) pair. Per-sample puts
cost a fixed overhead each (about 1 ms on a busy 2-core machine, whatever the size), which is what makes a
per-sample design slow; a consumer fetches each distinct batch ref of its share once (`fetch_payloads`) and
indexes it. The price: balancing spreads a batch's samples over ranks, so a rank may fetch samples it does
not use (at most min(batch size, dp_size) times its share; same-node reads are shared-memory).
`keep_batches=True` balances whole batches instead, when they divide evenly, removing that over-fetch for a
coarser balance.
"""

from rl_coordinator.coordinator._actor import DEFAULT_MAX_CONCURRENCY, DataCoordinator, start_coordinator
from rl_coordinator.coordinator._client import CoordinatorClient, fetch_payloads
from rl_coordinator.coordinator._local import LocalEdgeStore, use_local_path
from rl_coordinator.coordinator._metrics import (
    METRIC_BYTES_THROUGH,
    METRIC_CACHED_STEPS,
    METRIC_FILTERED_SAMPLES,
    METRIC_GET_WAIT_S,
    METRIC_PENDING_SAMPLES,
    METRIC_PUT_SAMPLES,
    METRIC_SERVED_SAMPLES,
)
from rl_coordinator.coordinator._requests import DEFAULT_TIMEOUT_S, RefSelection, SampleFilter, StepSpec
from rl_coordinator.coordinator._state import CoordinatorState

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_TIMEOUT_S",
    "METRIC_BYTES_THROUGH",
    "METRIC_CACHED_STEPS",
    "METRIC_FILTERED_SAMPLES",
    "METRIC_GET_WAIT_S",
    "METRIC_PENDING_SAMPLES",
    "METRIC_PUT_SAMPLES",
    "METRIC_SERVED_SAMPLES",
    "CoordinatorClient",
    "CoordinatorState",
    "DataCoordinator",
    "LocalEdgeStore",
    "RefSelection",
    "SampleFilter",
    "StepSpec",
    "fetch_payloads",
    "start_coordinator",
    "use_local_path",
]
