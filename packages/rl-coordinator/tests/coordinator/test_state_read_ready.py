"""CoordinatorState.read_ready: a share read at once when its step can be served, otherwise None and no trace."""

from __future__ import annotations

import asyncio

import pytest
from _state_helpers import SHORT_S, get, info, put, run, uids

from rl_coordinator import CoordinatorInputError, CoordinatorTimeout
from rl_coordinator.coordinator import CoordinatorState, ReadRequest, StepSpec

SPEC = StepSpec(dp_size=2, batch_size=2, balance=False)


def ready(state: CoordinatorState, edge: str, step: int, rank: int, spec: StepSpec = SPEC, **kw: object) -> object:
    return state.read_ready(ReadRequest(edge, step, rank, spec, **kw))


def test_a_step_the_queue_fills_is_partitioned_and_shared_with_get() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a"), info("b"), info("c"), info("d"))
        first = ready(state, "e", 0, 0)
        assert uids(first) == ["a"]
        assert uids(await get(state, "e", 0, 1, SPEC)) == ["b"]  # the partition read_ready made
        assert uids(ready(state, "e", 1, 1)) == ["d"]
        assert uids(ready(state, "e", 1, 0)) == ["c"]
        assert state.cached_steps() == [] and state.pending("e") == 0

    run(main())


def test_a_step_that_cannot_be_served_gives_none_and_opens_nothing() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a"))
        assert ready(state, "e", 0, 0) is None
        assert state.cached_steps() == []
        put(state, "e", info("b"))  # had read_ready left step 0 open, it would be partitioned now
        assert state.cached_steps() == [] and state.pending("e") == 2
        assert ready(state, "never-put", 0, 0) is None
        with pytest.raises(CoordinatorTimeout, match="step 1"):
            await get(state, "e", 1, 0, StepSpec(dp_size=1, batch_size=4), timeout_s=SHORT_S)

    run(main())


def test_a_step_another_rank_waits_for_stays_open() -> None:
    async def main() -> None:
        state = CoordinatorState()
        waiting = asyncio.ensure_future(get(state, "e", 0, 1, SPEC))
        await asyncio.sleep(0)
        assert ready(state, "e", 0, 0) is None
        assert state.cached_steps() == [("e", 0)]
        put(state, "e", info("a"), info("b"))
        assert uids(await waiting) == ["b"]
        assert uids(ready(state, "e", 0, 0)) == ["a"]

    run(main())


def test_requests_get_refuses_give_none_and_get_then_names_the_error() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a"), info("b"), info("c"), info("d"))
        assert uids(ready(state, "e", 0, 0)) == ["a"]
        assert ready(state, "e", 0, 0) is None  # this rank already read step 0
        other = StepSpec(dp_size=2, batch_size=2, balance=True)
        assert ready(state, "e", 0, 1, other) is None
        with pytest.raises(CoordinatorInputError, match="every rank of a step must send the same request"):
            await get(state, "e", 0, 1, other)
        assert uids(ready(state, "e", 0, 1)) == ["b"]
        assert ready(state, "e", 0, 1) is None  # freed: read by both ranks
        with pytest.raises(CoordinatorInputError, match="already read by all 2 ranks"):
            await get(state, "e", 0, 1, SPEC)

        def broken(_: object) -> bool:
            raise ValueError("bad filter")

        assert ready(state, "e", 1, 0, sample_filter=broken) is None
        assert state.cached_steps() == [] and state.pending("e") == 2
        with pytest.raises(CoordinatorInputError, match="sample_filter raised"):
            await get(state, "e", 1, 0, SPEC, sample_filter=broken)

    run(main())
