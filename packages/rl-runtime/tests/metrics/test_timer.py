"""Stage timers: accumulate into timing_s/<name>, nest, and survive exceptions."""

from __future__ import annotations

import time

import pytest

from rl_runtime.metrics import MetricsError
from rl_runtime.metrics._timer import Timer, timed

NAP_S = 0.02


def test_timer_records_elapsed_seconds() -> None:
    metrics: dict[str, float] = {}
    before = time.perf_counter()
    with timed("gen", metrics) as timer:
        time.sleep(NAP_S)
    outer = time.perf_counter() - before
    assert NAP_S <= metrics["timing_s/gen"] <= outer
    assert timer.last == metrics["timing_s/gen"]


def test_timers_of_different_names_nest() -> None:
    metrics: dict[str, float] = {}
    with timed("step", metrics):
        with timed("gen", metrics):
            time.sleep(NAP_S)
        with timed("update_actor", metrics):
            time.sleep(NAP_S)
    assert metrics["timing_s/gen"] >= NAP_S
    assert metrics["timing_s/update_actor"] >= NAP_S
    assert metrics["timing_s/step"] >= metrics["timing_s/gen"] + metrics["timing_s/update_actor"]


def test_repeated_blocks_accumulate_like_verl() -> None:
    metrics: dict[str, float] = {"timing_s/gen": 1.0}
    timer = Timer("gen", metrics)
    with timer:
        pass
    first = timer.last
    with timer:
        pass
    assert metrics["timing_s/gen"] == pytest.approx(1.0 + first + timer.last)


def test_same_name_nested_counts_once() -> None:
    metrics: dict[str, float] = {}
    timer = Timer("gen", metrics)
    before = time.perf_counter()
    with timer:
        with timer:
            time.sleep(NAP_S)
        with timed("gen", metrics):
            time.sleep(NAP_S)
    outer = time.perf_counter() - before
    # Only the outermost block counts: its time, not the sum of the three (which would exceed the time measured
    # around the block by the two inner blocks' 2 * NAP_S, however slow the machine).
    assert metrics["timing_s/gen"] == pytest.approx(timer.last)
    assert 2 * NAP_S <= metrics["timing_s/gen"] <= outer


def test_same_name_on_different_dicts_counts_in_both() -> None:
    first: dict[str, float] = {}
    second: dict[str, float] = {}
    with timed("gen", first), timed("gen", second):
        time.sleep(NAP_S)
    assert first["timing_s/gen"] >= NAP_S
    assert second["timing_s/gen"] >= NAP_S


def test_time_is_recorded_when_the_block_raises() -> None:
    metrics: dict[str, float] = {}
    with pytest.raises(RuntimeError, match="boom"), timed("gen", metrics):
        raise RuntimeError("boom")
    assert metrics["timing_s/gen"] >= 0.0
    with timed("gen", metrics):  # the name is free again
        time.sleep(NAP_S)
    assert metrics["timing_s/gen"] >= NAP_S


@pytest.mark.parametrize("bad", ["", "timing_s/gen", None])
def test_timer_names_are_bare_stage_names(bad: object) -> None:
    with pytest.raises(MetricsError, match="a timer name must be a non-empty stage name without 'timing_s/'"):
        Timer(bad, {})  # type: ignore[arg-type]
