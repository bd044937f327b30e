"""StalenessBuffer: hand-worked drop/keep counts, group-aware takes, rejections, conservation property."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.staleness import (
    METRIC_BUFFERED,
    METRIC_DROPPED,
    METRIC_KEPT,
    METRIC_SERVED,
    METRIC_STALENESS_MEAN,
    BufferEntry,
    StalenessBuffer,
)


def info(uid: str, version: int, group: int = 0, edge: str = "rollout") -> SampleInfo:
    return SampleInfo(uid=uid, group_id=group, prompt_tokens=4, response_tokens=8, policy_version=version, edge=edge)


def put(buffer: StalenessBuffer, *infos: SampleInfo) -> None:
    buffer.put(list(infos), [f"ref-{i.uid}" for i in infos])


def uids(entries: list[BufferEntry]) -> list[str]:
    return [entry.info.uid for entry in entries]


def test_drop_policy_by_hand() -> None:
    dropped: list[BufferEntry] = []
    buffer = StalenessBuffer(1, policy="drop", on_drop=dropped.extend)
    # Put out of version order: the take serves by version, then by arrival.
    put(buffer, info("c", 2), info("a", 0), info("b", 1), info("d", 2))
    # At version 2 the staleness is a: 2, b: 1, c: 0, d: 0; a exceeds max_staleness=1 and is dropped.
    served = buffer.take(10, current_version=2)
    assert uids(served) == ["b", "c", "d"]
    assert served[0].ref == "ref-b"
    assert uids(dropped) == ["a"]
    assert buffer.metrics() == {
        METRIC_DROPPED: 1.0,
        METRIC_KEPT: 0.0,
        METRIC_SERVED: 3.0,
        METRIC_STALENESS_MEAN: pytest.approx((1 + 0 + 0) / 3),
        METRIC_BUFFERED: 0.0,
    }


def test_keep_policy_by_hand() -> None:
    buffer = StalenessBuffer(1, policy="keep")
    put(buffer, info("c", 2), info("a", 0), info("b", 1), info("d", 2))
    assert uids(buffer.take(2, current_version=2)) == ["a", "b"]  # oldest first, the stale one included
    assert uids(buffer.take(5, current_version=4)) == ["c", "d"]  # staleness 2 each: both stale, kept
    metrics = buffer.metrics()
    # Served staleness: a 2, b 1 (at version 2); c 2, d 2 (at version 4) -> mean 7 / 4; a, c, d are stale.
    assert metrics[METRIC_KEPT] == 3.0
    assert metrics[METRIC_DROPPED] == 0.0
    assert metrics[METRIC_STALENESS_MEAN] == pytest.approx(7 / 4)


def test_drop_removes_all_stale_even_beyond_n() -> None:
    buffer = StalenessBuffer(0)
    put(buffer, info("a", 0), info("b", 0), info("c", 1), info("d", 1))
    assert uids(buffer.take(1, current_version=1)) == ["c"]
    assert len(buffer) == 1
    assert buffer.metrics()[METRIC_DROPPED] == 2.0
    assert buffer.take(0, current_version=1) == []
    assert uids(buffer.take(3, current_version=1)) == ["d"]


def test_metrics_reset() -> None:
    buffer = StalenessBuffer(3)
    put(buffer, info("a", 0))
    buffer.take(1, current_version=1)
    assert buffer.metrics(reset=True)[METRIC_SERVED] == 1.0
    assert buffer.metrics() == {
        METRIC_DROPPED: 0.0,
        METRIC_KEPT: 0.0,
        METRIC_SERVED: 0.0,
        METRIC_STALENESS_MEAN: 0.0,
        METRIC_BUFFERED: 0.0,
    }


def test_group_aware_drop_and_keep_by_hand() -> None:
    # Group 1: versions 0 and 1 (oldest member 0); group 2: versions 2, 2. max_staleness 1, version 2.
    samples = [info("g1a", 0, 1), info("g2a", 2, 2), info("g1b", 1, 1), info("g2b", 2, 2)]
    drop = StalenessBuffer(1, policy="drop", group_aware=True)
    put(drop, *samples)
    assert uids(drop.take(4, current_version=2)) == ["g2a", "g2b"]
    assert drop.metrics()[METRIC_DROPPED] == 2.0  # the whole of group 1, although g1b alone is fresh enough
    keep = StalenessBuffer(1, policy="keep", group_aware=True)
    put(keep, *samples)
    assert uids(keep.take(3, current_version=2)) == ["g1a", "g1b"]  # group 2 does not fit in the last slot
    assert keep.metrics()[METRIC_KEPT] == 1.0  # only g1a (staleness 2) is past the bound
    assert uids(keep.take(3, current_version=2)) == ["g2a", "g2b"]


def test_groups_are_keyed_by_edge_and_group_id() -> None:
    buffer = StalenessBuffer(5, group_aware=True)
    put(buffer, info("x", 0, group=7, edge="a"), info("y", 0, group=7, edge="b"))
    assert uids(buffer.take(1, current_version=0)) == ["x"]


def test_group_size_waits_for_complete_groups() -> None:
    buffer = StalenessBuffer(2, group_aware=True, group_size=2)
    put(buffer, info("a1", 0, 1), info("b1", 0, 2))
    assert buffer.take(4, current_version=0) == []
    put(buffer, info("b2", 0, 2))
    assert uids(buffer.take(4, current_version=0)) == ["b1", "b2"]
    with pytest.raises(CoordinatorInputError, match="group 1 of edge 'rollout' would have 3 samples in the buffer"):
        put(buffer, info("a2", 1, 1), info("a3", 1, 1))
    assert len(buffer) == 1  # a rejected put adds nothing
    # The incomplete group still ages out under the drop policy.
    assert buffer.take(4, current_version=3) == []
    assert buffer.metrics()[METRIC_DROPPED] == 1.0


def test_group_larger_than_n_is_rejected_without_losing_samples() -> None:
    buffer = StalenessBuffer(0, group_aware=True)
    put(buffer, info("old", 0, 9), info("a", 1, 1), info("b", 1, 1), info("c", 1, 1))
    with pytest.raises(CoordinatorInputError, match=r"take\(n=2\) cannot serve the oldest group, which has 3 samples"):
        buffer.take(2, current_version=1)
    assert len(buffer) == 4  # nothing dropped or served by the rejected take
    assert uids(buffer.take(3, current_version=1)) == ["a", "b", "c"]


def test_rejections() -> None:
    with pytest.raises(CoordinatorInputError, match="max_staleness must be an int >= 0, got -1"):
        StalenessBuffer(-1)
    with pytest.raises(CoordinatorInputError, match=r"policy must be one of \['drop', 'keep'\], got 'dropp'"):
        StalenessBuffer(1, policy="dropp")
    with pytest.raises(CoordinatorInputError, match="group_size must be an int >= 1, got 0"):
        StalenessBuffer(1, group_aware=True, group_size=0)
    with pytest.raises(CoordinatorInputError, match="group_size needs group_aware=True"):
        StalenessBuffer(1, group_size=4)
    buffer = StalenessBuffer(1)
    with pytest.raises(CoordinatorInputError, match="put got 1 infos but 2 refs"):
        buffer.put([info("a", 0)], ["r1", "r2"])
    with pytest.raises(CoordinatorInputError, match="put takes SampleInfo descriptions, got dict"):
        buffer.put([{"uid": "a"}], ["r"])
    with pytest.raises(CoordinatorInputError, match="uid 'a' is already in the buffer or twice in this put"):
        put(buffer, info("a", 0), info("a", 0))
    put(buffer, info("a", 0))
    with pytest.raises(CoordinatorInputError, match="uid 'a' is already in the buffer"):
        put(buffer, info("a", 1))
    with pytest.raises(CoordinatorInputError, match="n must be an int >= 0, got -1"):
        buffer.take(-1, current_version=0)
    with pytest.raises(CoordinatorInputError, match="current_version must be an int >= 0, got -2"):
        buffer.take(1, current_version=-2)
    put(buffer, info("future", 3))
    with pytest.raises(CoordinatorInputError, match="'future' has policy_version 3, newer than current_version 2"):
        buffer.take(1, current_version=2)
    buffer.take(1, current_version=3)
    with pytest.raises(CoordinatorInputError, match="current_version 2 is lower than 3 from an earlier take"):
        buffer.take(1, current_version=2)


def test_concurrent_puts_and_takes_conserve_samples() -> None:
    buffer = StalenessBuffer(1_000)
    served: list[str] = []

    def producer(prefix: str) -> None:
        for i in range(200):
            put(buffer, info(f"{prefix}{i}", 0))

    threads = [threading.Thread(target=producer, args=(p,)) for p in "xyz"]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads) or len(buffer):
        served.extend(uids(buffer.take(7, current_version=0)))
    for thread in threads:
        thread.join()
    assert sorted(served) == sorted(f"{p}{i}" for p in "xyz" for i in range(200))


operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 4), st.integers(0, 2), st.integers(0, 3)),
        st.tuples(st.just("take"), st.integers(0, 6), st.integers(0, 2), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=operations,
    max_staleness=st.integers(0, 3),
    policy=st.sampled_from(["drop", "keep"]),
    group_aware=st.booleans(),
)
def test_no_sample_lost_or_duplicated(ops, max_staleness, policy, group_aware) -> None:
    dropped: list[BufferEntry] = []
    buffer = StalenessBuffer(max_staleness, policy=policy, group_aware=group_aware, on_drop=dropped.extend)
    version = 0
    put_uids: list[str] = []
    served: list[BufferEntry] = []
    for op, count, lag_or_bump, group in ops:
        if op == "put":
            batch = [info(f"s{len(put_uids) + i}", max(0, version - lag_or_bump), group) for i in range(count)]
            put(buffer, *batch)
            put_uids.extend(s.uid for s in batch)
        else:
            version += lag_or_bump
            before = len(buffer)
            try:
                taken = buffer.take(count, current_version=version)
            except CoordinatorInputError as error:
                # Only a whole group too large for n is refused, and a refused take changes nothing.
                assert group_aware and "cannot serve the oldest group" in str(error)
                assert len(buffer) == before
                continue
            assert len(taken) <= count
            versions = [entry.info.policy_version for entry in taken]
            if not group_aware:
                assert versions == sorted(versions)  # oldest first
            if policy == "drop":
                assert all(version - v <= max_staleness for v in versions)
            served.extend(taken)
    remaining = buffer.take(len(put_uids), current_version=version) if policy == "keep" else []
    remaining_uids = uids(remaining) + [
        entry.info.uid for entry in buffer.take(len(put_uids), current_version=version + max_staleness + 1)
    ]
    everything = uids(served) + uids(dropped) + remaining_uids
    assert sorted(everything) == sorted(put_uids)  # none lost, none twice
    assert all(entry.ref == f"ref-{entry.info.uid}" for entry in served + dropped)
    metrics = buffer.metrics()
    assert metrics[METRIC_DROPPED] == len(dropped)
    if policy == "keep":
        assert not dropped
    assert len(buffer) == 0
