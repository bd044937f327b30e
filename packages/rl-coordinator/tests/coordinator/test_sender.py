"""Coalesced puts: a lone batch goes at once, batches queued meanwhile go together, refusals stay per batch."""

from __future__ import annotations

import pickle
import sys
import time
from typing import Any

import pytest
import ray
import torch

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import CoordinatorClient, PutRequest, ReadRequest, StepSpec, fetch_payloads
from rl_coordinator.coordinator._sender import ARENA_BUNDLES, MAX_ARENA_BYTES, PutSender

# Ray workers cannot import this test module (it is not on their path), so its functions travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

SEND_DELAY_S = 0.2
"""How long the test double takes to acknowledge a send: far longer than queueing the other batches."""


def infos_for(edge: str, start: int, n: int) -> list[SampleInfo]:
    return [SampleInfo(f"{edge}-{i}", i, 2, 3, edge=edge) for i in range(start, start + n)]


class _SlowMethod:
    def __init__(self, calls: list[list[PutRequest]], error: Exception | None) -> None:
        self.calls, self.error = calls, error

    def remote(self, requests: list[PutRequest]) -> Any:
        self.calls.append(requests)
        time.sleep(SEND_DELAY_S)
        if self.error is not None:
            raise self.error
        return ray.put([len(request.infos) for request in requests])


class SlowCoordinatorDouble:
    """Test double of a DataCoordinator handle: records each put_many and acknowledges it after a delay."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[list[PutRequest]] = []
        self.put_many = _SlowMethod(self.calls, error)


def wait_for_sends(double: SlowCoordinatorDouble, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(double.calls) < count:
        assert time.monotonic() < deadline, f"{len(double.calls)} send(s) started, expected {count}"
        time.sleep(0.001)


def test_batches_queued_during_a_send_go_out_together(ray_runtime: None) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double)
    futures = [client.put_batch("e", infos_for("e", 0, 4), torch.full((4, 2), 0), wait=False)]
    wait_for_sends(double, 1)  # a lone batch goes at once; the rest queue while it is unacknowledged
    futures += [
        client.put_batch("e", infos_for("e", 4 * b, 4), torch.full((4, 2), b), wait=False) for b in range(1, 20)
    ]
    client.flush(timeout_s=30)
    assert [f.result() for f in futures] == [4] * 20
    assert [len(call) for call in double.calls] == [1, 19]
    refs = {ref for call in double.calls for request in call for ref in request.refs}
    assert len(refs) == 2  # one ray.put per send under the default bundle size
    last = double.calls[1][-1]
    assert last.positions == list(range(18 * 4, 19 * 4))
    assert torch.equal(ray.get(last.refs[0])[last.positions[0]], torch.full((2,), 19))


def test_a_small_bundle_cap_splits_the_puts_not_the_call(ray_runtime: None) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double, max_bundle_bytes=1)
    futures = [client.put_batch("e", infos_for("e", 0, 2), torch.zeros(2, 8), wait=False)]
    wait_for_sends(double, 1)
    futures += [client.put_batch("e", infos_for("e", 2 * b, 2), torch.zeros(2, 8), wait=False) for b in range(1, 6)]
    client.flush(timeout_s=30)
    assert all(f.result() == 2 for f in futures)
    assert [len(call) for call in double.calls] == [1, 5]
    assert len({request.refs[0] for request in double.calls[1]}) == 5  # each batch in its own ray.put


def test_each_edge_gets_its_own_objects_within_one_call(ray_runtime: None) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double)
    client.put_batch("a", infos_for("a", 0, 1), [0], wait=False)
    wait_for_sends(double, 1)
    for b in range(1, 5):
        edge = "ab"[b % 2]
        client.put_batch(edge, infos_for(edge, b, 1), [f"{edge}{b}"], wait=False)
    client.flush(timeout_s=30)
    assert len(double.calls) == 2
    second = double.calls[1]
    payloads = {edge: [ray.get(r.refs[0])[r.positions[0]] for r in second if r.edge_key == edge] for edge in "ab"}
    assert payloads == {"a": ["a2", "a4"], "b": ["b1", "b3"]}  # each edge's batches in the order they were put
    refs = {edge: {request.refs[0] for request in second if request.edge_key == edge} for edge in "ab"}
    assert len(refs["a"]) == len(refs["b"]) == 1 and refs["a"] != refs["b"]


def test_a_failed_send_fails_its_batches_only(ray_runtime: None) -> None:
    double = SlowCoordinatorDouble(error=RuntimeError("actor died"))
    client = CoordinatorClient(double)
    first = client.put_batch("e", infos_for("e", 0, 1), [0], wait=False)
    with pytest.raises(RuntimeError, match="actor died"):
        first.result(timeout=30)
    double.put_many.error = None
    assert client.put_batch("e", infos_for("e", 1, 1), [1]) == 1


def test_a_put_cancelled_before_its_send_is_not_sent(ray_runtime: None) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double)
    first = client.put_batch("e", infos_for("e", 0, 1), [0], wait=False)
    wait_for_sends(double, 1)
    cancelled = client.put_batch("e", infos_for("e", 1, 1), [1], wait=False)
    kept = client.put_batch("e", infos_for("e", 2, 1), [2], wait=False)
    assert cancelled.cancel()
    client.flush(timeout_s=30)
    assert first.result() == kept.result() == 1
    assert [[info.uid for request in call for info in request.infos] for call in double.calls] == [["e-0"], ["e-2"]]
    assert not first.cancel()  # a sent put cannot be taken back


def test_a_failing_sender_fails_the_puts_it_drained(ray_runtime: None, monkeypatch: pytest.MonkeyPatch) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double)

    def broken(*args: Any) -> Any:
        raise ValueError("bundle bug")

    monkeypatch.setattr("rl_coordinator.coordinator._sender.bundle_groups", broken)
    failed = client.put_batch("e", infos_for("e", 0, 1), [0], wait=False)
    with pytest.raises(ValueError, match="bundle bug"):
        failed.result(timeout=30)
    client.flush(timeout_s=30)
    monkeypatch.undo()
    assert client.put_batch("e", infos_for("e", 1, 1), [1]) == 1


def test_flush_times_out_naming_the_unacknowledged_puts(ray_runtime: None) -> None:
    client = CoordinatorClient(SlowCoordinatorDouble())
    client.put_batch("e", infos_for("e", 0, 1), [0], wait=False)
    with pytest.raises(TimeoutError, match=r"1 put\(s\) still unacknowledged after 0.01s"):
        client.flush(timeout_s=0.01)
    client.flush(timeout_s=30)


def test_an_object_store_refusal_fails_the_bundle_and_the_client_goes_on(
    ray_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    double = SlowCoordinatorDouble()
    client = CoordinatorClient(double)
    real_put = ray.put

    def store_full(value: Any) -> Any:
        raise MemoryError("object store full")

    monkeypatch.setattr(ray, "put", store_full)
    refused = client.put_batch("e", infos_for("e", 0, 1), [0], wait=False)
    with pytest.raises(MemoryError, match="object store full"):
        refused.result(timeout=30)
    monkeypatch.setattr(ray, "put", real_put)
    assert client.put_batch("e", infos_for("e", 1, 1), [1]) == 1


def test_a_refused_batch_leaves_the_batches_sent_with_it_on_the_coordinator(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    first = client.put_batch("dup", infos_for("dup", 0, 2), torch.zeros(2, 1), wait=False)
    futures = [
        client.put_batch("dup", infos_for("dup", 2, 2), torch.full((2, 1), 2.0), wait=False),
        client.put_batch("dup", infos_for("dup", 0, 1), torch.zeros(1, 1), wait=False),  # uid dup-0 again
        client.put_batch("dup", infos_for("dup", 4, 2), torch.full((2, 1), 4.0), wait=False),
    ]
    client.flush(timeout_s=30)
    assert first.result() == 2
    with pytest.raises(CoordinatorInputError, match=r"uid 'dup-0' is put twice or already pending on edge 'dup'"):
        futures[1].result()
    assert futures[0].exception() is None and futures[2].exception() is None
    infos, samples = client.get_batch(ReadRequest("dup", 0, 0, StepSpec(1, 6, balance=False)))
    assert [info.uid for info in infos] == [f"dup-{i}" for i in range(6)]
    assert [float(sample) for sample in samples] == [0.0, 0.0, 2.0, 2.0, 4.0, 4.0]


def test_the_payload_may_be_reused_once_put_batch_returns(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    buffer = torch.zeros(3, 2)
    for b in range(4):
        buffer.fill_(float(b))
        client.put_batch("reuse", infos_for("reuse", 3 * b, 3), buffer, wait=False)
    client.flush(timeout_s=30)
    selection = client.get_refs(ReadRequest("reuse", 0, 0, StepSpec(1, 12, balance=False)))
    assert [float(sample[0]) for sample in fetch_payloads(selection)] == [b for b in range(4) for _ in range(3)]


def test_snapshots_survive_a_staging_ring_that_wraps_and_fills(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator, max_bundle_bytes=256)  # a ring of two 256-byte bundles
    buffer = torch.zeros(4, 8)  # 128 bytes a batch: the ring fills while batches queue behind a send
    for b in range(40):
        buffer.fill_(float(b))
        client.put_batch("ring", infos_for("ring", 4 * b, 4), buffer, wait=False)
    client.flush(timeout_s=30)
    assert client._sender.arena.held_bytes == 0  # every snapshot given back once its bundle was put
    selection = client.get_refs(ReadRequest("ring", 0, 0, StepSpec(1, 160, balance=False)))
    assert [float(sample[0]) for sample in fetch_payloads(selection)] == [b for b in range(40) for _ in range(4)]


@ray.remote(num_cpus=0)
def put_from_a_task(client: CoordinatorClient) -> int:
    return client.put_batch("shipped", infos_for("shipped", 0, 2), [0, 1])


def test_a_client_travels_to_another_process(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator, timeout_s=5.0, max_bundle_bytes=1024)
    copy = pickle.loads(pickle.dumps(client))
    assert (copy.timeout_s, copy.max_bundle_bytes) == (5.0, 1024)
    assert ray.get(put_from_a_task.remote(client)) == 2


def test_the_staging_ring_holds_two_bundles_up_to_its_cap() -> None:
    assert PutSender(None, max_bundle_bytes=1024).arena.capacity == ARENA_BUNDLES * 1024
    assert PutSender(None, max_bundle_bytes=1 << 30).arena.capacity == MAX_ARENA_BYTES


@pytest.mark.parametrize("cap", [0, 1.5, True])
def test_max_bundle_bytes_is_checked(cap: Any) -> None:
    with pytest.raises(CoordinatorInputError, match=r"max_bundle_bytes must be an int >= 1"):
        CoordinatorClient(None, max_bundle_bytes=cap)
