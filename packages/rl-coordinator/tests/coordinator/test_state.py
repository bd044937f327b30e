"""CoordinatorState without Ray: partitions shared by the ranks of a step, freeing, waiting, rejections, metrics and
conservation (filters and group-aware selection: test_state_filters_and_groups.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from _state_helpers import SHORT_S, get, info, put, run, uids
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_coordinator import CoordinatorInputError, CoordinatorTimeout, SampleInfo
from rl_coordinator.coordinator import (
    METRIC_DROPPED_SAMPLES,
    METRIC_GET_WAIT_S,
    METRIC_PUT_SAMPLES,
    METRIC_SERVED_SAMPLES,
    CoordinatorState,
    ReadRequest,
    RefSelection,
    StepSpec,
)


def test_balanced_partition_by_hand_and_refs_follow_the_samples() -> None:
    async def main() -> list[RefSelection]:
        state = CoordinatorState()
        put(state, "e", *(info(f"s{t}", tokens=t) for t in (8, 7, 6, 5)))
        put(state, "e", *(info(f"s{t}", tokens=t) for t in (4, 3, 2, 1)))
        spec = StepSpec(dp_size=2, batch_size=8)
        return list(await asyncio.gather(get(state, "e", 0, 0, spec), get(state, "e", 0, 1, spec)))

    shares = run(main())
    # 36 tokens over 2 ranks of 4 samples: a perfect split gives 18 each.
    assert [sum(i.total_tokens for i in s.infos) for s in shares] == [18, 18]
    assert sorted(uids(shares[0]) + uids(shares[1])) == sorted(f"s{t}" for t in range(1, 9))
    for share in shares:
        for sample, ref, pos in zip(share.infos, share.refs, share.positions, strict=True):
            tokens = sample.total_tokens
            assert (ref, pos) == (("ref-s8", 8 - tokens) if tokens > 4 else ("ref-s4", 4 - tokens))


def test_keep_batches_hands_each_rank_whole_producer_batches() -> None:
    async def main() -> list[RefSelection]:
        state = CoordinatorState()
        for b in range(4):
            put(state, "e", *(info(f"b{b}-{s}", tokens=2 + 3 * b + s) for s in range(2)))
        spec = StepSpec(dp_size=2, batch_size=8)  # keep_batches is the default
        return [await get(state, "e", 0, rank, spec) for rank in range(2)]

    shares = run(main())
    assert [len(set(share.refs)) for share in shares] == [2, 2]
    # Batch loads 5, 11, 17, 23: the balanced pairing is {5, 23} and {11, 17}, 28 each.
    assert [sum(i.total_tokens for i in share.infos) for share in shares] == [28, 28]


def test_keep_batches_exchanges_single_samples_when_whole_batches_do_not_balance() -> None:
    async def main(keep_batches: bool) -> list[RefSelection]:
        state = CoordinatorState()
        for b, tokens in enumerate(([6, 3], [5, 2], [1, 1], [1, 1])):
            put(state, "e", *(info(f"b{b}-{s}", tokens=t) for s, t in enumerate(tokens)))
        spec = StepSpec(dp_size=2, batch_size=8, keep_batches=keep_batches)
        return [await get(state, "e", 0, rank, spec) for rank in range(2)]

    # Whole batches load 9, 7, 2, 2: at best 11 / 9. Exchanging the 6 and the 5 evens it to 10 / 10, splitting
    # two batches; the two small batches stay whole, so each rank reads 3 payloads.
    shares = run(main(True))
    assert [sum(i.total_tokens for i in share.infos) for share in shares] == [10, 10]
    assert [len(set(share.refs)) for share in shares] == [3, 3]
    by_sample = run(main(False))  # sample by sample: the same balance, with no regard for batches
    assert sorted(sum(i.total_tokens for i in share.infos) for share in by_sample) == [10, 10]


def test_contiguous_split_keeps_arrival_order() -> None:
    async def main() -> list[list[str]]:
        state = CoordinatorState()
        put(state, "e", *(info(f"u{i}") for i in range(6)))
        spec = StepSpec(dp_size=3, batch_size=6, balance=False)
        return [uids(await get(state, "e", 0, r, spec)) for r in (2, 0, 1)]

    assert run(main()) == [["u4", "u5"], ["u0", "u1"], ["u2", "u3"]]


def test_first_rank_fixes_the_partition_later_ranks_read_it_then_it_is_freed() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=2, balance=False)
        put(state, "e", info("a"), info("b"))
        assert uids(await get(state, "e", 0, 0, spec)) == ["a"]
        put(state, "e", info("c"), info("d"))  # arrives after the partition: must not leak into step 0
        assert state.cached_steps() == [("e", 0)]
        assert uids(await get(state, "e", 0, 1, spec)) == ["b"]
        assert state.cached_steps() == []
        assert state.pending("e") == 2
        with pytest.raises(CoordinatorInputError, match=r"step 0 of edge 'e' was already read by all 2 ranks"):
            await get(state, "e", 0, 0, spec)
        assert uids(await get(state, "e", 1, 1, spec)) == ["d"]

    run(main())


def test_edges_and_steps_are_separate_and_lower_steps_go_first() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=1, batch_size=2)
        later = asyncio.ensure_future(get(state, "x", 1, 0, spec))
        earlier = asyncio.ensure_future(get(state, "x", 0, 0, spec))
        other = asyncio.ensure_future(get(state, "y", 0, 0, spec))
        await asyncio.sleep(0)
        put(state, "x", info("x1"), info("x2"))
        put(state, "y", info("y1"), info("y2"))
        await asyncio.wait({earlier}, timeout=5.0)
        assert earlier.done() and not later.done()
        assert sorted(uids(earlier.result())) == ["x1", "x2"]
        assert sorted(uids(await other)) == ["y1", "y2"]
        put(state, "x", info("x3"), info("x4"))
        assert sorted(uids(await later)) == ["x3", "x4"]

    run(main())


def test_timeout_names_edge_step_and_counts_and_frees_the_entry() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "rollout", *(info(f"u{i}") for i in range(5)))
        spec = StepSpec(dp_size=2, batch_size=8)
        with pytest.raises(
            CoordinatorTimeout,
            match=r"edge 'rollout' step 3: expected 8 samples, present 5 \(5 selectable\)",
        ):
            await get(state, "rollout", 3, 1, spec, timeout_s=SHORT_S)
        assert state.cached_steps() == []
        put(state, "rollout", *(info(f"v{i}") for i in range(3)))
        assert len((await get(state, "rollout", 3, 1, spec)).infos) == 4

    run(main())


def test_samples_arriving_as_the_timeout_fires_are_still_served(monkeypatch: pytest.MonkeyPatch) -> None:
    state = CoordinatorState()

    async def late_wait_for(awaitable: Any, timeout: float) -> None:
        awaitable.close()  # the event wait is never awaited
        put(state, "e", info("a"), info("b"))  # the samples land ...
        raise asyncio.TimeoutError  # ... in the same tick as the timeout

    monkeypatch.setattr("rl_coordinator.coordinator._state.asyncio.wait_for", late_wait_for)
    share = run(get(state, "e", 0, 0, StepSpec(dp_size=1, batch_size=2)))
    assert sorted(uids(share)) == ["a", "b"] and state.cached_steps() == []


def test_unknown_edge_fails_at_once_or_after_the_wait() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "rollout", info("a"))
        spec = StepSpec(dp_size=1, batch_size=1)
        with pytest.raises(CoordinatorInputError, match=r"'rollot' was never put \(wait_for_edge=False\).*'rollout'"):
            await state.get(ReadRequest("rollot", 0, 0, spec, wait_for_edge=False))
        with pytest.raises(CoordinatorInputError, match=r"'train' was never put \(after waiting 0.05s\)"):
            await state.get(ReadRequest("train", 0, 0, spec, timeout_s=SHORT_S))
        assert uids(await get(state, "rollout", 0, 0, spec)) == ["a"]

    run(main())


def test_bad_requests_are_rejected_and_the_state_keeps_serving() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=2, balance=False)
        put(state, "e", info("a"), info("b"))
        with pytest.raises(CoordinatorInputError, match=r"dp_rank=2 is outside dp_size=2"):
            await get(state, "e", 0, 2, spec)
        with pytest.raises(CoordinatorInputError, match=r"step must be an int >= 0, got -1"):
            await get(state, "e", -1, 0, spec)
        with pytest.raises(CoordinatorInputError, match=r"timeout_s must be a finite number"):
            await get(state, "e", 0, 0, spec, timeout_s=0)
        with pytest.raises(CoordinatorInputError, match=r"sample_filter must be a callable"):
            await get(state, "e", 0, 0, spec, sample_filter="odd")
        assert uids(await get(state, "e", 0, 0, spec)) == ["a"]
        with pytest.raises(CoordinatorInputError, match=r"rank 0 already asked for step 0 of edge 'e'"):
            await get(state, "e", 0, 0, spec)
        with pytest.raises(CoordinatorInputError, match=r"every rank of a step must send the same request"):
            await get(state, "e", 0, 1, StepSpec(dp_size=2, batch_size=4, balance=False))
        assert uids(await get(state, "e", 0, 1, spec)) == ["b"]
        with pytest.raises(CoordinatorInputError, match=r"get takes a ReadRequest, got tuple; build one with"):
            await state.get(("e", 1, 0, spec))  # type: ignore[arg-type]

    run(main())


def test_drop_frees_a_half_read_step_and_a_late_get_fails() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=2, balance=False)
        put(state, "e", info("a"), info("b"), info("c"), info("d"))
        assert uids(await get(state, "e", 0, 0, spec)) == ["a"]
        assert state.drop("e", 0) is True
        assert state.cached_steps() == [] and state.metrics_dict()[METRIC_DROPPED_SAMPLES] == 1  # "b", unread
        with pytest.raises(CoordinatorInputError, match=r"step 0 of edge 'e' was already dropped and freed"):
            await get(state, "e", 0, 1, spec)
        assert state.drop("e", 0) is False and state.drop("e", 5) is False  # nothing cached: nothing to drop
        assert uids(await get(state, "e", 1, 1, spec)) == ["d"]  # later steps are untouched

    run(main())


def test_drop_wakes_waiting_ranks_with_an_error_and_serves_later_steps() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=1, batch_size=2)
        put(state, "e", info("a"))
        waiting = asyncio.ensure_future(get(state, "e", 0, 0, spec))
        later = asyncio.ensure_future(get(state, "e", 1, 0, spec))
        await asyncio.sleep(0)
        assert state.cached_steps() == [("e", 0), ("e", 1)]
        assert state.drop("e", 0) is True
        with pytest.raises(CoordinatorInputError, match=r"step 0 of edge 'e' was dropped while 1 rank\(s\) waited"):
            await waiting
        put(state, "e", info("b"))  # step 1 takes what step 0 would have taken
        assert sorted(uids(await later)) == ["a", "b"]
        assert state.metrics_dict()[METRIC_DROPPED_SAMPLES] == 0

    run(main())


def test_drop_before_frees_every_earlier_cached_step_of_the_edge_only() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=2, balance=False)
        put(state, "e", *(info(f"e{i}") for i in range(6)))
        put(state, "f", info("f0"), info("f1"))
        for step in range(3):
            await get(state, "e", step, 0, spec)
        await get(state, "f", 0, 0, spec)
        assert state.drop_before("e", 2) == [0, 1]
        assert state.cached_steps() == [("e", 2), ("f", 0)]
        assert state.metrics_dict()[METRIC_DROPPED_SAMPLES] == 2
        assert state.drop_before("e", 0) == []

    run(main())


def test_drop_rejections() -> None:
    state = CoordinatorState()
    with pytest.raises(CoordinatorInputError, match=r"edge_key must be a non-empty string, got ''"):
        state.drop("", 0)
    with pytest.raises(CoordinatorInputError, match=r"step must be an int >= 0, got -1"):
        state.drop_before("e", -1)


def test_put_rejections() -> None:
    state = CoordinatorState()
    put(state, "e", info("a"))
    with pytest.raises(CoordinatorInputError, match=r"uid 'a' is put twice or already pending on edge 'e'"):
        put(state, "e", info("a"))
    with pytest.raises(CoordinatorInputError, match=r"uid 'b' is put twice"):
        put(state, "e", info("b"), info("b"))
    with pytest.raises(CoordinatorInputError, match=r"says edge 'other' but was put on edge 'e'"):
        state.put("e", [SampleInfo("c", 0, 1, 1, edge="other")], ["r"])
    with pytest.raises(CoordinatorInputError, match=r"refs must be a list with one ref per sample \(2\), got 1"):
        state.put("e", [info("c"), info("d")], ["r"])
    with pytest.raises(CoordinatorInputError, match=r"positions\[0\] must be an int >= 0, got -1"):
        state.put("e", [info("c")], ["r"], [-1])
    with pytest.raises(CoordinatorInputError, match=r"positions must be None or a list of 1 ints"):
        state.put("e", [info("c")], ["r"], [0, 1])
    with pytest.raises(CoordinatorInputError, match=r"infos must be a non-empty list of SampleInfo"):
        state.put("e", [], [])
    with pytest.raises(CoordinatorInputError, match=r"infos\[0\] must be a SampleInfo, got dict"):
        state.put("e", [{"uid": "c"}], ["r"])  # type: ignore[list-item]
    with pytest.raises(CoordinatorInputError, match=r"edge_key must be a non-empty string"):
        state.put("", [info("c")], ["r"])
    assert state.pending("e") == 1  # the rejected puts left nothing behind


def test_metrics_count_samples_and_waits() -> None:
    async def main() -> dict[str, float]:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=4)
        started = time.monotonic()
        waiting = asyncio.ensure_future(get(state, "e", 0, 0, spec))
        await asyncio.sleep(SHORT_S)
        put(state, "e", *(info(f"u{i}") for i in range(6)))
        await waiting
        first_done = time.monotonic()
        await get(state, "e", 0, 1, spec)
        second_s = time.monotonic() - first_done
        outer_s.extend([first_done - started, second_s])
        return state.metrics_dict()

    outer_s: list[float] = []
    metrics = run(main())
    assert metrics[METRIC_PUT_SAMPLES] == 6 and metrics[METRIC_SERVED_SAMPLES] == 4
    # Two gets: one waited about SHORT_S, one found the partition ready; the mean is about half of it. The upper
    # bound is each get's time measured around it, not a multiple of SHORT_S: a loaded machine may oversleep.
    first_s, second_s = outer_s
    assert SHORT_S / 2 * 0.8 <= metrics[METRIC_GET_WAIT_S] <= (first_s + second_s) / 2


@settings(max_examples=40, deadline=None)
@given(
    batch_sizes=st.lists(st.integers(1, 6), min_size=1, max_size=12),
    dp_size=st.integers(1, 4),
    per_rank=st.integers(1, 3),
    balance=st.booleans(),
)
def test_conservation_no_sample_lost_or_duplicated(
    batch_sizes: list[int], dp_size: int, per_rank: int, balance: bool
) -> None:
    total = sum(batch_sizes)
    step_size = dp_size * per_rank
    steps = total // step_size

    async def main() -> tuple[list[str], CoordinatorState]:
        state = CoordinatorState()
        spec = StepSpec(dp_size=dp_size, batch_size=step_size, balance=balance)
        readers = [get(state, "e", step, rank, spec) for step in range(steps) for rank in reversed(range(dp_size))]
        pending = asyncio.gather(*readers)
        uid = 0
        for size in batch_sizes:
            put(state, "e", *(info(f"u{uid + i}", tokens=1 + (uid + i) % 7) for i in range(size)))
            uid += size
            await asyncio.sleep(0)
        shares = await pending
        return [u for share in shares for u in uids(share)], state

    served, state = run(main())
    assert len(served) == len(set(served)) == steps * step_size
    assert state.pending("e") == total - len(served)
    assert state.cached_steps() == []
