"""CoordinatorClient on a real Ray runtime: payload kinds, one fetch per distinct ref, client-side rejections."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
import ray
import torch
from tensordict import TensorDict

from rl_coordinator import CoordinatorInputError, CoordinatorTimeout, SampleInfo
from rl_coordinator.coordinator import (
    CoordinatorClient,
    ReadRequest,
    RefSelection,
    StepSpec,
    fetch_payloads,
    start_coordinator,
)


def infos_for(edge: str, *uids: str) -> list[SampleInfo]:
    return [SampleInfo(uid, 0, 2, 3 + i, edge=edge) for i, uid in enumerate(uids)]


def test_tensordict_and_list_payloads_round_trip(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    td = TensorDict({"ids": torch.arange(6).reshape(3, 2), "mask": torch.ones(3, 2, dtype=torch.bool)}, [3])
    client.put_batch("td", infos_for("td", "a", "b", "c"), td)
    infos, samples = client.get_batch(ReadRequest("td", 0, 0, StepSpec(1, 3, balance=False)))
    assert [i.uid for i in infos] == ["a", "b", "c"]
    assert torch.equal(torch.stack(samples)["ids"], td["ids"])
    client.put_batch("list", infos_for("list", "x", "y"), [{"text": "x"}, {"text": "y"}])
    infos, samples = client.get_batch(ReadRequest("list", 0, 0, StepSpec(1, 2, balance=False)))
    assert samples == [{"text": "x"}, {"text": "y"}]


def test_wait_false_returns_a_future_of_the_pending_count(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    ack = client.put_batch("ack", infos_for("ack", "a"), torch.zeros(1, 3), wait=False)
    assert isinstance(ack, Future) and ack.result(timeout=30) == 1


def test_fetch_payloads_reads_each_distinct_ref_once_and_indexes_it() -> None:
    # No coordinator needed: a selection mixing a batch ref (positions) and a per-sample ref (None).
    batch, single = ray.put(torch.tensor([[1], [2], [3]])), ray.put("alone")
    selection = RefSelection(infos_for("f", "a", "b", "c"), [batch, single, batch], [2, None, 0])
    assert fetch_payloads(selection)[1:] == ["alone", torch.tensor([1])]
    assert torch.equal(fetch_payloads(selection)[0], torch.tensor([3]))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"ids": torch.zeros(2, 3)}, r"payload must be indexable by sample.*wrap a dict of tensors in a TensorDict"),
        (torch.tensor(1.0), r"payload must have one entry per sample \(len\(payload\)\), got Tensor"),
        (torch.zeros(3, 2), r"payload has 3 samples but infos has 2"),
    ],
)
def test_put_batch_rejects_bad_payloads(coordinator: Any, payload: Any, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        CoordinatorClient(coordinator).put_batch("rejected", infos_for("rejected", "a", "b"), payload)


def test_requests_without_a_timeout_wait_the_clients_default(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator, timeout_s=0.2)
    client.put_batch("default-wait", infos_for("default-wait", "a"), [1])
    with pytest.raises(CoordinatorTimeout, match=r"timed out after 0.2s waiting for edge 'default-wait' step 0"):
        client.get_refs(ReadRequest("default-wait", 0, 0, StepSpec(1, 2)))


def test_client_rejections_before_calling_the_actor(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    with pytest.raises(CoordinatorInputError, match=r"request must be a ReadRequest, got tuple; build one with"):
        client.get_refs(("e", 0, 0, 2))  # type: ignore[arg-type]
    with pytest.raises(CoordinatorInputError, match=r"request must be a ReadRequest, got str"):
        client.get_batch("e")  # type: ignore[arg-type]
    with pytest.raises(CoordinatorInputError, match=r"timeout_s must be a finite number of seconds > 0, got 0"):
        CoordinatorClient(coordinator, timeout_s=0)


def test_start_coordinator_by_name_and_its_rejection(ray_runtime: None) -> None:
    handle = start_coordinator(name="coordinator-under-test", max_concurrency=8)
    same = ray.get_actor("coordinator-under-test")
    CoordinatorClient(handle).put_batch("named", infos_for("named", "a"), [1])
    assert ray.get(same.pending.remote("named")) == 1
    ray.kill(handle)
    with pytest.raises(CoordinatorInputError, match=r"max_concurrency must be an int >= 1, got 0"):
        start_coordinator(max_concurrency=0)
