"""CoordinatorState without Ray: sample filters and group-aware selection (whole groups, on one rank)."""

from __future__ import annotations

import asyncio

import pytest
from _state_helpers import SHORT_S, get, info, put, run, uids

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import METRIC_FILTERED_SAMPLES, CoordinatorState, StepSpec


def test_filter_drops_rejected_samples_ahead_of_the_cut_only() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", *(info(f"u{t}", tokens=t) for t in (2, 3, 4, 5, 6, 7, 9)))
        spec = StepSpec(dp_size=1, batch_size=2)
        share = await get(state, "e", 0, 0, spec, sample_filter=lambda i: i.total_tokens % 2 == 1)
        assert sorted(uids(share)) == ["u3", "u5"]
        # u2 and u4 were rejected ahead of the cut and dropped; u6 (rejected, after it), u7, u9 stay.
        assert state.pending("e") == 3
        assert state.metrics_dict()[METRIC_FILTERED_SAMPLES] == 2

    run(main())


def test_filter_that_raises_fails_its_step_only() -> None:
    def broken(_: SampleInfo) -> bool:
        raise KeyError("reward")

    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a"), info("b"))
        spec = StepSpec(dp_size=1, batch_size=2)
        with pytest.raises(
            CoordinatorInputError, match=r"sample_filter raised KeyError\('reward'\) on edge 'e' step 0"
        ):
            await get(state, "e", 0, 0, spec, sample_filter=broken)
        assert state.pending("e") == 2 and state.cached_steps() == []
        assert sorted(uids(await get(state, "e", 0, 0, spec))) == ["a", "b"]

    run(main())


def test_group_aware_takes_complete_groups_and_keeps_them_on_one_rank() -> None:
    async def main() -> None:
        state = CoordinatorState()
        spec = StepSpec(dp_size=2, batch_size=4, group_aware=True, group_size=2)
        waiter = asyncio.ensure_future(get(state, "e", 0, 0, spec))
        # Only group 1 is complete: the step (2 groups) must wait.
        put(state, "e", info("g1a", 5, 1), info("g3a", 1, 3), info("g2a", 9, 2), info("g1b", 7, 1))
        await asyncio.sleep(SHORT_S)
        assert not waiter.done()
        put(state, "e", info("g2b", 3, 2))
        first = await waiter
        second = await get(state, "e", 0, 1, spec)
        assert {frozenset(uids(first)), frozenset(uids(second))} == {
            frozenset({"g1a", "g1b"}),
            frozenset({"g2a", "g2b"}),
        }
        assert state.pending("e") == 1  # g3a waits for its sibling

    run(main())


def test_group_aware_filter_drops_whole_groups_and_unsized_groups_that_overshoot_wait() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a1", 4, 1), info("a2", 5, 1), info("b1", 4, 2), info("b2", 6, 2), info("b3", 6, 2))
        put(state, "e", info("c1", 4, 3), info("c2", 4, 3))
        spec = StepSpec(dp_size=1, batch_size=2, group_aware=True)
        # Group 1 has an odd-token member: dropped whole. Group 2 (3 samples) overshoots 2: left for later.
        share = await get(state, "e", 0, 0, spec, sample_filter=lambda i: i.total_tokens % 2 == 0)
        assert sorted(uids(share)) == ["c1", "c2"]
        assert state.pending("e") == 3 and state.metrics_dict()[METRIC_FILTERED_SAMPLES] == 2

    run(main())


def test_unequal_groups_cannot_be_balanced_and_the_error_names_the_step() -> None:
    async def main() -> None:
        state = CoordinatorState()
        put(state, "e", info("a1", 4, 1), info("b1", 4, 2), info("b2", 4, 2), info("b3", 4, 2))
        spec = StepSpec(dp_size=2, batch_size=4, group_aware=True)
        with pytest.raises(CoordinatorInputError, match=r"cannot split step 0 of edge 'e'.*same size"):
            await get(state, "e", 0, 0, spec)
        assert state.pending("e") == 4

    run(main())
