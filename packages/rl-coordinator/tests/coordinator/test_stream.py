"""ShareStream on a real Ray runtime: the shares of consecutive steps by one streaming call, read as get reads them."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import ray
import torch

from rl_coordinator import CoordinatorInputError, CoordinatorTimeout, SampleInfo
from rl_coordinator.coordinator import MAX_SHARES_PER_ITEM, CoordinatorClient, ReadRequest, ShareStream, StepSpec

STEP, RANKS, STEPS = 6, 2, 3
POLL_S, SETTLE_S = 0.05, 30.0


def put_samples(client: CoordinatorClient, edge: str, start: int, n: int) -> None:
    infos = [SampleInfo(f"{edge}-{i}", i, 1, 1 + (5 * i) % 7, edge=edge) for i in range(start, start + n)]
    client.put_batch(edge, infos, torch.arange(start, start + n).reshape(n, 1))


def request(edge: str, step: int, rank: int, **options: Any) -> ReadRequest:
    return ReadRequest(edge, step, rank, StepSpec(RANKS, STEP), **options)


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(POLL_S)


def cached(client: CoordinatorClient) -> list[tuple[str, int]]:
    return ray.get(client.coordinator.cached_steps.remote())


def test_streams_read_every_step_like_gets_do(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    put_samples(client, "s-same", 0, STEP * STEPS)
    put_samples(client, "s-ref", 0, STEP * STEPS)
    streamed = [list(client.stream_refs(request("s-same", 0, rank), STEPS)) for rank in range(RANKS)]
    got = [[client.get_refs(request("s-ref", step, rank)) for step in range(STEPS)] for rank in range(RANKS)]
    for step in range(STEPS):
        parts = [[info.uid.split("-")[-1] for info in streamed[rank][step].infos] for rank in range(RANKS)]
        assert parts == [[info.uid.split("-")[-1] for info in got[rank][step].infos] for rank in range(RANKS)]
    uids = [info.uid for rank in streamed for share in rank for info in share.infos]
    assert sorted(uids) == sorted(f"s-same-{i}" for i in range(STEP * STEPS))  # none lost or twice
    assert not [key for key in cached(client) if key[0] == "s-same"]


def test_steps_ready_together_come_in_one_item_up_to_the_cap(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    steps = MAX_SHARES_PER_ITEM + 2
    put_samples(client, "s-burst", 0, STEP * steps)
    one_rank = ReadRequest("s-burst", 0, 0, StepSpec(1, STEP), timeout_s=SETTLE_S)
    items = [ray.get(item) for item in coordinator.stream.remote(one_rank, steps)]
    assert [len(item) for item in items] == [MAX_SHARES_PER_ITEM, 2]
    uids = [info.uid for item in items for share in item for info in share.infos]
    assert uids == [f"s-burst-{i}" for i in range(STEP * steps)]  # in step order, none lost or twice
    put_samples(client, "s-one", 0, STEP * 6)
    one_each = ReadRequest("s-one", 0, 0, StepSpec(1, STEP), timeout_s=SETTLE_S)
    assert [len(ray.get(item)) for item in coordinator.stream.remote(one_each, 3, 1)] == [1, 1, 1]
    shares = list(client.stream_refs(ReadRequest("s-one", 3, 0, StepSpec(1, STEP)), 3, max_shares_per_item=1))
    assert [info.uid for share in shares for info in share.infos] == [f"s-one-{i}" for i in range(3 * STEP, 6 * STEP)]


def test_a_stream_and_a_get_share_one_partition(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    put_samples(client, "s-mixed", 0, STEP * 2)
    with client.stream_refs(request("s-mixed", 0, 0), 2) as stream:
        first = next(stream)
        other = client.get_refs(request("s-mixed", 0, 1))
        assert stream.next_step == 1
        second = next(stream)
    mine = {info.uid for info in first.infos}
    assert mine.isdisjoint(info.uid for info in other.infos)
    assert len(mine | {info.uid for info in other.infos}) == STEP
    assert len(second.infos) == STEP // RANKS
    with pytest.raises(StopIteration):
        next(stream)


def test_shares_are_pushed_as_samples_arrive(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    with client.stream_refs(request("s-later", 0, 0)) as first, client.stream_refs(request("s-later", 0, 1)) as other:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(first.next_batch)
            put_samples(client, "s-later", 0, STEP)
            infos, samples = pending.result(timeout=SETTLE_S)
        assert [int(row) for row in samples] == [int(info.uid.split("-")[-1]) for info in infos]
        assert len(next(other).infos) == STEP // RANKS
        assert first.next_step == other.next_step == 1


def test_closing_releases_the_claim_on_the_next_step(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    stream = client.stream_refs(request("s-close", 0, 0))
    wait_until(lambda: ("s-close", 0) in cached(client))  # the stream waits for step 0 on rank 0
    stream.close()
    stream.close()
    wait_until(lambda: ("s-close", 0) not in cached(client))
    put_samples(client, "s-close", 0, STEP)
    assert len(client.get_refs(request("s-close", 0, 0)).infos) == STEP // RANKS  # rank 0 may ask again
    with pytest.raises(StopIteration):
        next(stream)


def test_a_refused_step_ends_the_stream_with_its_error(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    put_samples(client, "s-bad", 0, STEP)
    client.get_refs(request("s-bad", 0, 0))
    stream = client.stream_refs(request("s-bad", 0, 0))
    with pytest.raises(CoordinatorInputError, match="rank 0 already asked for step 0 of edge 's-bad'"):
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)
    assert len(client.get_refs(request("s-bad", 0, 1)).infos) == STEP // RANKS  # the coordinator still serves


def test_a_step_that_never_fills_times_out_naming_the_counts(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    put_samples(client, "s-short", 0, STEP - 1)
    stream = client.stream_refs(request("s-short", 0, 0, timeout_s=0.5))
    with pytest.raises(CoordinatorTimeout, match=r"edge 's-short' step 0: expected 6 samples, present 5"):
        next(stream)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("not a request",), r"request must be a ReadRequest, got str"),
        ((request("s-x", 0, 0), 0), r"steps must be an int >= 1, got 0"),
        ((request("s-x", 0, 0), 1.5), r"steps must be an int >= 1, got 1.5"),
        ((request("s-x", 0, 0), 1, 0), r"max_shares_per_item must be an int >= 1, got 0"),
    ],
)
def test_bad_stream_arguments_are_refused_before_any_call(coordinator: Any, arguments: tuple, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        ShareStream(coordinator, *arguments)
