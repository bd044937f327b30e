"""Moving samples between pipeline stages by reference: the DataCoordinator actor, its client, the local path.

Producers `ray.put` each batch once and hand the coordinator only SampleInfo and ObjectRefs (a PutRequest);
consumers ask for their share of a step with a ReadRequest (edge, step, rank and the step's StepSpec), or
take the shares of consecutive steps from one streaming call (`ShareStream`: half the cost per step, and the
steps ready together in one item), and
fetch them straight from the producers' objects. When producer and consumer have the same data-parallel layout
and no balancing is asked, the batch stays in the worker (`use_local_path`; the runtime's executor keeps it). A
step whose ranks will not all read it is freed with `drop` / `drop_before`.

Ref granularity: a client coalesces its puts (`_sender`): a batch goes out at once when none of the client's
puts is unacknowledged, and the batches put meanwhile go out together, as one call to the actor and the
payloads of each edge in as few `ray.put`s as `max_bundle_bytes` allows (`_bundle.PayloadBundle`, CPU tensors
as raw bytes).
Each `ray.put` and each actor call costs a fixed round trip of CPU whatever the size (bench/README.md, "Figures
behind the docstrings"), which is what makes per-sample or per-batch designs slow. Per sample the coordinator keeps a
(ref, position) pair; a consumer fetches each distinct ref of its share once (`fetch_payloads`) and indexes it.
Balancing spreads an object's samples over ranks, so a rank may fetch samples it does not use;
`StepSpec.keep_batches` (the default) balances runs of samples sharing a ref first and then exchanges single
samples, which keeps about the balance of sample-by-sample while a rank reads few objects.

The Ray-backed names (the actor, its client, `fetch_payloads`, `ShareStream`) import Ray on first use; the rest
(requests, `split_across_ranks`, `use_local_path`) work in a process without Ray, such as a torchrun rank.
"""

from typing import TYPE_CHECKING

from rl_coordinator.coordinator._local import use_local_path
from rl_coordinator.coordinator._metrics import (
    METRIC_BYTES_THROUGH,
    METRIC_CACHED_STEPS,
    METRIC_DROPPED_SAMPLES,
    METRIC_FILTERED_SAMPLES,
    METRIC_GET_WAIT_S,
    METRIC_PENDING_SAMPLES,
    METRIC_PUT_SAMPLES,
    METRIC_SERVED_SAMPLES,
)
from rl_coordinator.coordinator._requests import (
    DEFAULT_TIMEOUT_S,
    MAX_SHARES_PER_ITEM,
    PutRequest,
    ReadRequest,
    RefSelection,
    SampleFilter,
    StepSpec,
)
from rl_coordinator.coordinator._selection import split_across_ranks
from rl_coordinator.coordinator._state import CoordinatorState
from rl_core import lazy_exports

if TYPE_CHECKING:
    from rl_coordinator.coordinator._actor import DEFAULT_MAX_CONCURRENCY, DataCoordinator, start_coordinator
    from rl_coordinator.coordinator._client import CoordinatorClient
    from rl_coordinator.coordinator._fetch import fetch_payloads
    from rl_coordinator.coordinator._stream import ShareStream

_NEED_RAY = {
    "DEFAULT_MAX_CONCURRENCY": "_actor",
    "DataCoordinator": "_actor",
    "start_coordinator": "_actor",
    "CoordinatorClient": "_client",
    "fetch_payloads": "_fetch",
    "ShareStream": "_stream",
}
"""The names whose modules import Ray, imported on first use: a torchrun process (no Ray) uses the rest."""


__getattr__ = lazy_exports(__name__, _NEED_RAY)


__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_TIMEOUT_S",
    "MAX_SHARES_PER_ITEM",
    "METRIC_BYTES_THROUGH",
    "METRIC_CACHED_STEPS",
    "METRIC_DROPPED_SAMPLES",
    "METRIC_FILTERED_SAMPLES",
    "METRIC_GET_WAIT_S",
    "METRIC_PENDING_SAMPLES",
    "METRIC_PUT_SAMPLES",
    "METRIC_SERVED_SAMPLES",
    "CoordinatorClient",
    "CoordinatorState",
    "DataCoordinator",
    "PutRequest",
    "ReadRequest",
    "RefSelection",
    "SampleFilter",
    "ShareStream",
    "StepSpec",
    "fetch_payloads",
    "split_across_ranks",
    "start_coordinator",
    "use_local_path",
]
