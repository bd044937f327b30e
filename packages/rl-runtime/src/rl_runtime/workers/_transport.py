"""Moving a StepData over a coordinator edge: SampleInfo from the schema tensors out, stacked samples back in."""

from __future__ import annotations

from typing import Any

from rl_coordinator import SampleInfo
from rl_coordinator.coordinator import ReadRequest, StepSpec
from rl_core.schema import GROUP_ID, POLICY_VERSION, PROMPT_LEN, RESPONSE_LEN, UID
from rl_runtime.workers._errors import RoutingError, StepDataError
from rl_runtime.workers._padding import stack_padded
from rl_runtime.workers._routing import EdgeRoute
from rl_runtime.workers._step_data import SampleBatch, StepData

_MIN_TOKENS = 1
"""SampleInfo refuses a sample of zero tokens; a batch without length tensors counts one token per sample."""


def _column(data: StepData, key: str) -> list[int] | None:
    tensor = data.batch.get(key)
    if tensor is None:
        return None
    if tensor.dim() != 1 or tensor.dtype.is_floating_point:
        raise StepDataError(
            f"batch[{key!r}] must be a (B,) integer tensor, got shape {tuple(tensor.shape)} {tensor.dtype}"
        )
    return [int(value) for value in tensor.tolist()]


def sample_infos(data: StepData, route: EdgeRoute) -> list[SampleInfo]:
    """One SampleInfo per sample of `data` for coordinator edge `route`, from `uid`, `group_id` and the lengths."""
    uids = _column(data, UID)
    if uids is None:
        raise StepDataError(
            f"edge {route.key!r} goes through the coordinator, which needs batch[{UID!r}] (B,) int64 sample ids; "
            f"node {route.src!r} returned {sorted(data.batch)}"
        )
    n = len(uids)
    groups = _column(data, GROUP_ID) or uids
    prompts = _column(data, PROMPT_LEN) or [0] * n
    responses = _column(data, RESPONSE_LEN) or [_MIN_TOKENS] * n
    versions = _column(data, POLICY_VERSION) or [0] * n
    return [
        SampleInfo(
            uid=str(uids[i]),
            group_id=groups[i],
            prompt_tokens=prompts[i],
            response_tokens=responses[i] if prompts[i] + responses[i] > 0 else _MIN_TOKENS,
            policy_version=versions[i],
            edge=route.key,
            source_dp_size=route.producer_dp_size,
        )
        for i in range(n)
    ]


def put_edge(client: Any, route: EdgeRoute, data: StepData) -> None:
    """Put a producer's output on coordinator edge `route` (the batch to the object store, infos to the coordinator)."""
    if data.num_samples == 0:
        return  # the coordinator refuses empty puts; a consumer waiting for samples times out with its own error
    client.put_batch(route.key, sample_infos(data, route), SampleBatch(data, f"node {route.src!r}"))


def get_edge(client: Any, route: EdgeRoute, step: int, dp_rank: int) -> StepData:
    """This consumer rank's share of coordinator edge `route` at `step`, stacked back into one StepData.

    The samples may come from several producer ranks, whose batches were padded to different widths: each field is
    then padded to the widest and trimmed to the longest sample (`stack_padded`), as one producer would have built
    it; samples of one width are stacked as they are.
    """
    if route.batch_size is None:
        raise RoutingError(f"edge {route.key!r} has no batch size; build routes with plan_routes")
    spec = StepSpec(route.consumer_dp_size, route.batch_size, balance=False)
    _, samples = client.get_batch(ReadRequest(route.key, step, dp_rank, spec))
    return stack_padded(samples, always_trim=False)
