"""The DataCoordinator actor on a real Ray runtime: concurrency, conservation, freeing, bad requests."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import ray
import torch

from rl_coordinator import CoordinatorInputError, CoordinatorTimeout, SampleInfo
from rl_coordinator.coordinator import (
    METRIC_BYTES_THROUGH,
    METRIC_DROPPED_SAMPLES,
    METRIC_PUT_SAMPLES,
    CoordinatorClient,
    PutRequest,
    ReadRequest,
    StepSpec,
    fetch_payloads,
)

# Ray workers cannot import this test module (it is not on their path), so its functions travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

FEATURES = 4  # payload width; each row is filled with its sample's global index so a mix-up is visible


def make_infos(edge: str, start: int, n: int, group_size: int = 1) -> list[SampleInfo]:
    return [
        SampleInfo(f"{edge}-{i}", i // group_size, 1 + i % 3, 1 + (7 * i) % 11, edge=edge)
        for i in range(start, start + n)
    ]


def read(edge: str, step: int, rank: int, dp_size: int, batch_size: int, **options: Any) -> ReadRequest:
    """A ReadRequest; `options` go to the StepSpec, except the request's own sample_filter and timeout_s."""
    own = {key: options.pop(key) for key in ("sample_filter", "timeout_s") if key in options}
    return ReadRequest(edge, step, rank, StepSpec(dp_size, batch_size, **options), **own)


def rows(start: int, n: int) -> torch.Tensor:
    return torch.arange(start, start + n).repeat_interleave(FEATURES).reshape(n, FEATURES)


def run_threads(target: Any, count: int) -> list[Any]:
    """Run target(i) for i in range(count) on concurrent threads; return the results in order, re-raising."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(target, range(count)))


# Layout of the concurrency test. edge: (producers, batches per producer, samples per batch, ranks, step size)
LAYOUT = {"gen->train": (3, 3, 4, 2, 12), "gen->ref": (2, 3, 6, 3, 6), "gen->critic": (4, 2, 3, 4, 8)}


# All producers run on threads of one Ray task and all consumer ranks on threads of another: many concurrent
# callers of the actor from two other processes, without paying a worker process (and its torch import) per
# caller on a two-core machine.
@ray.remote(num_cpus=0)
def produce_all(coordinator: Any) -> dict[str, int]:
    jobs = [(edge, p) for edge, (n_prod, *_) in LAYOUT.items() for p in range(n_prod)]

    def producer(job: int) -> int:
        edge, p = jobs[job]
        _, batches, batch, _, _ = LAYOUT[edge]
        client = CoordinatorClient(coordinator)
        acks = []
        for b in range(batches):
            start = (p * batches + b) * batch
            acks.append(client.put_batch(edge, make_infos(edge, start, batch), rows(start, batch), wait=False))
        client.flush()
        assert all(ack.done() and ack.exception() is None for ack in acks)
        return batches * batch

    counts = run_threads(producer, len(jobs))
    return {edge: sum(c for (e, _), c in zip(jobs, counts, strict=True) if e == edge) for edge in LAYOUT}


@ray.remote(num_cpus=0)
def consume_all(coordinator: Any) -> dict[str, list[list[list[str]]]]:
    jobs = [(edge, rank) for edge, (*_, dp_size, _) in LAYOUT.items() for rank in range(dp_size)]

    def rank_loop(job: int) -> list[list[str]]:
        edge, rank = jobs[job]
        n_prod, batches, batch, dp_size, step_batch = LAYOUT[edge]
        client = CoordinatorClient(coordinator, timeout_s=60.0)
        shares = []
        for step in range(n_prod * batches * batch // step_batch):
            infos, samples = client.get_batch(read(edge, step, rank, dp_size, step_batch))
            for info, sample in zip(infos, samples, strict=True):
                assert torch.equal(sample, torch.full((FEATURES,), int(info.uid.rsplit("-", 1)[1])))
            shares.append([info.uid for info in infos])
        return shares

    results = run_threads(rank_loop, len(jobs))
    return {edge: [r for (e, _), r in zip(jobs, results, strict=True) if e == edge] for edge in LAYOUT}


def test_refs_in_a_list_reach_the_actor_unresolved(coordinator: Any) -> None:
    payload = rows(0, 2)
    ref = ray.put(payload)
    request = PutRequest("unresolved", make_infos("unresolved", 0, 2), [ref, ref], [0, 1])
    assert ray.get(coordinator.put.remote(request)) == 2
    # Refs that had been resolved on the way in would come back as tensors.
    selection = ray.get(coordinator.get.remote(read("unresolved", 0, 0, 1, 2, balance=False)))
    assert all(isinstance(r, ray.ObjectRef) for r in selection.refs) and selection.positions == [0, 1]
    assert torch.equal(torch.stack(fetch_payloads(selection)), payload)


def test_many_producers_and_consumers_on_several_edges(coordinator: Any) -> None:
    consumed = consume_all.remote(coordinator)  # the ranks start first and wait for the producers
    assert ray.get(produce_all.remote(coordinator)) == {"gen->train": 36, "gen->ref": 36, "gen->critic": 24}
    by_edge = ray.get(consumed)
    for edge, (n_prod, batches, batch, dp_size, step_batch) in LAYOUT.items():
        per_rank = by_edge[edge]  # [rank][step] -> uids
        put_uids = {f"{edge}-{i}" for i in range(n_prod * batches * batch)}
        served = [uid for rank_shares in per_rank for share in rank_shares for uid in share]
        assert len(served) == len(set(served)) and set(served) == put_uids, edge  # none lost, none twice
        for step in range(len(per_rank[0])):
            # Every rank read the same partition: the shares of a step are disjoint, equal-sized and cover it.
            shares = [set(rank_shares[step]) for rank_shares in per_rank]
            assert [len(s) for s in shares] == [step_batch // dp_size] * dp_size
            assert len(set().union(*shares)) == step_batch
    assert [key for key in ray.get(coordinator.cached_steps.remote()) if key[0] in LAYOUT] == []
    assert sum(ray.get([coordinator.pending.remote(edge) for edge in LAYOUT])) == 0


def test_step_cache_is_freed_when_every_rank_has_read(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    client.put_batch("freed", make_infos("freed", 0, 4), rows(0, 4))
    client.get_refs(read("freed", 0, 1, 2, 4))
    assert ("freed", 0) in ray.get(coordinator.cached_steps.remote())
    client.get_refs(read("freed", 0, 0, 2, 4))
    assert ("freed", 0) not in ray.get(coordinator.cached_steps.remote())
    with pytest.raises(CoordinatorInputError, match=r"step 0 of edge 'freed' was already read by all 2 ranks"):
        client.get_refs(read("freed", 0, 0, 2, 4))


def test_bad_requests_then_a_good_one_is_still_served(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    client.put_batch("bad", make_infos("bad", 0, 4), rows(0, 4))
    # Straight to the actor, past the client's own checks (a malformed request cannot be built at all).
    with pytest.raises(CoordinatorInputError, match=r"get takes a ReadRequest, got tuple"):
        ray.get(coordinator.get.remote(("bad", 0, 0, 1)))
    with pytest.raises(CoordinatorInputError, match=r"put takes a PutRequest, got list"):
        ray.get(coordinator.put.remote(make_infos("bad", 4, 1)))
    unknown = ReadRequest("bda", 0, 0, StepSpec(1, 1), wait_for_edge=False)
    with pytest.raises(CoordinatorInputError, match=r"edge 'bda' was never put \(wait_for_edge=False\)"):
        ray.get(coordinator.get.remote(unknown))
    with pytest.raises(CoordinatorInputError, match=r"uid 'bad-0' is put twice or already pending"):
        client.put_batch("bad", make_infos("bad", 0, 1), rows(0, 1))
    infos, samples = client.get_batch(read("bad", 0, 0, 1, 4, balance=False))
    assert [i.uid for i in infos] == ["bad-0", "bad-1", "bad-2", "bad-3"]
    assert torch.equal(torch.stack(samples), rows(0, 4))


def test_timeouts_name_the_edge_step_and_counts(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    client.put_batch("slow", make_infos("slow", 0, 3), rows(0, 3))
    with pytest.raises(CoordinatorTimeout, match=r"edge 'slow' step 0: expected 4 samples, present 3"):
        client.get_refs(read("slow", 0, 0, 2, 4, timeout_s=0.2))
    with pytest.raises(CoordinatorInputError, match=r"edge 'never' was never put \(after waiting 0.2s\)"):
        client.get_refs(read("never", 0, 0, 1, 1, timeout_s=0.2))
    client.put_batch("slow", make_infos("slow", 3, 1), rows(3, 1))
    assert len(client.get_refs(read("slow", 0, 0, 2, 4)).infos) == 2


def test_filter_and_group_aware_selection_through_ray(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    edge = "groups"
    # Groups of 2 (ids 0..3); group 1 has a sample with metadata reward None and is filtered out whole.
    infos = make_infos(edge, 0, 8, group_size=2)
    infos[3] = SampleInfo(infos[3].uid, 1, 1, 1, edge=edge, metadata={"reward": None})
    client.put_batch(edge, infos, rows(0, 8))
    has_reward = lambda info: info.metadata.get("reward", 0.0) is not None  # noqa: E731
    spec = StepSpec(2, 4, group_aware=True, group_size=2)
    shares = [client.get_batch(ReadRequest(edge, 0, r, spec, sample_filter=has_reward)) for r in range(2)]
    assert sorted(sorted(i.group_id for i in share[0]) for share in shares) == [[0, 0], [2, 2]]
    for share_infos, samples in shares:
        assert [int(s[0]) for s in samples] == [int(i.uid.split("-")[1]) for i in share_infos]
    assert ray.get(coordinator.pending.remote(edge)) == 2  # group 3 remains; group 1 was dropped


def test_metrics_count_puts_and_bytes_stay_small(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    before = client.metrics()[METRIC_PUT_SAMPLES]
    client.put_batch("metrics", make_infos("metrics", 0, 8), rows(0, 8))
    after = client.metrics()
    assert after[METRIC_PUT_SAMPLES] - before == 8
    assert 0 < after[METRIC_BYTES_THROUGH] < 1024


def test_drop_frees_an_abandoned_step_and_wakes_its_waiting_ranks(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    client.put_batch("dropped", make_infos("dropped", 0, 4), rows(0, 4))
    before = client.metrics()[METRIC_DROPPED_SAMPLES]
    client.get_refs(read("dropped", 0, 0, 2, 4))  # rank 1 never reads step 0
    waiting = coordinator.get.remote(read("dropped", 1, 0, 1, 8, timeout_s=60.0))  # 8 samples never come
    while ("dropped", 1) not in ray.get(coordinator.cached_steps.remote()):
        pass
    assert client.drop_before("dropped", 2) == [0, 1]
    with pytest.raises(CoordinatorInputError, match=r"step 1 of edge 'dropped' was dropped while 1 rank\(s\) waited"):
        ray.get(waiting, timeout=30)
    assert [key for key in ray.get(coordinator.cached_steps.remote()) if key[0] == "dropped"] == []
    assert client.metrics()[METRIC_DROPPED_SAMPLES] - before == 2  # rank 1's share of step 0
    with pytest.raises(CoordinatorInputError, match=r"step 0 of edge 'dropped' was already dropped and freed"):
        client.get_refs(read("dropped", 0, 1, 2, 4))
    assert client.drop("dropped", 0) is False
