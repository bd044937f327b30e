"""PipelinedDriver against stand-in workers that log their calls: the rollout ranks run at most eta steps ahead,
catch up at the horizon, and a drain trains every step whose rollout already ran."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
import ray.cloudpickle

from rl_runtime.workers._driver_async import AHEAD_METRIC, ROLLOUT_IDLE_METRIC, TRAINER_IDLE_METRIC, PipelinedDriver

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

TRAIN_S = 0.5
"""A training step's length: long enough that a rollout step run ahead of it starts while it runs."""


@ray.remote(num_cpus=0)
class LoggingWorker:
    """Logs (call, argument, start, end); a training worker's step takes TRAIN_S, a rollout worker's is instant
    (unless `seconds` says otherwise)."""

    def __init__(self, train: bool, seconds: float | None = None) -> None:
        self.train = train
        self.seconds = (TRAIN_S if train else 0.0) if seconds is None else seconds
        self.log: list[tuple[str, int, float, float]] = []

    def run_steps(self, steps: list[int]) -> list[dict[str, float]]:
        start = time.time()
        time.sleep(self.seconds)
        self.log.append(("run", steps[0], start, time.time()))
        node = "train" if self.train else "generate"
        return [{f"timing_s/{node}": 1.0, "timing_s/receive_weights": 0.0 if self.train else 0.25}]

    def catch_up_weights(self, version: int) -> dict[str, float]:
        self.log.append(("catch_up", version, time.time(), time.time()))
        return {"timing_s/catch_up_weights": 0.5}

    def calls(self) -> list[tuple[str, int, float, float]]:
        return self.log


@pytest.fixture
def workers(ray_runtime: None) -> Iterator[list[Any]]:
    handles: list[Any] = [LoggingWorker.remote(False), LoggingWorker.remote(True)]
    ray.get([handle.calls.remote() for handle in handles])  # both started before a step is timed
    yield handles
    for handle in handles:
        ray.kill(handle)


def _driver(workers: list[Any], eta: int) -> PipelinedDriver:
    nodes = {0: ("generate", "receive_weights"), 1: ("train",)}
    return PipelinedDriver(
        workers, 30.0, rollout_ranks=[0], nodes=nodes, receive_node="receive_weights", max_staleness=eta
    )


def test_rollout_runs_at_most_eta_steps_ahead_and_catches_up_at_the_horizon(workers: list[Any]) -> None:
    results = _driver(workers, 2).run_steps(range(5), horizon=5)
    rollout, train = ray.get([worker.calls.remote() for worker in workers])
    assert [(call, arg) for call, arg, _, _ in rollout] == [*(("run", step) for step in range(5)), ("catch_up", 5)]
    assert [arg for _, arg, _, _ in train] == [0, 1, 2, 3, 4]
    starts = {arg: start for call, arg, start, _ in rollout if call == "run"}
    ends = {arg: end for _, arg, _, end in train}
    # Rollout step 2 ran while training step 0 did; rollout step k + 3 never before training step k had ended.
    assert starts[2] < ends[0]
    for step in range(2):
        assert starts[step + 3] >= ends[step]
    assert [result.metrics[AHEAD_METRIC] for result in results] == [2.0, 2.0, 2.0, 1.0, 0.0]
    # Trainer: no coordinator wait reported; rollout: 0.25 s receiving of 1.25 s, plus the catch-up at the end.
    assert [result.metrics[TRAINER_IDLE_METRIC] for result in results] == [0.0] * 5
    assert [result.metrics[ROLLOUT_IDLE_METRIC] for result in results] == [0.2] * 4 + [pytest.approx(0.75 / 1.75)]


def test_drain_trains_the_steps_already_generated(workers: list[Any]) -> None:
    driver = _driver(workers, 2)
    assert [result.step for result in driver.run_steps([0, 1], horizon=10)] == [0, 1]
    assert driver.in_flight == 2  # rollout steps 2 and 3 ran ahead
    assert [result.step for result in driver.drain(2)] == [2, 3]
    assert driver.in_flight == 0 and driver.drain(4) == []
    rollout = ray.get(workers[0].calls.remote())
    assert [(call, arg) for call, arg, _, _ in rollout][-2:] == [("run", 3), ("catch_up", 4)]


def test_training_ranks_get_the_next_step_before_the_driver_collects_this_one(ray_runtime: None) -> None:
    # A slow rollout rank and an instant training rank: the training rank's step 1 is queued with step 0, so it runs
    # while rollout step 0 still does, instead of after the driver has collected step 0 from both.
    handles: list[Any] = [LoggingWorker.remote(False, 0.5), LoggingWorker.remote(True, 0.0)]
    ray.get([handle.calls.remote() for handle in handles])
    try:
        results = _driver(handles, 1).run_steps(range(3), horizon=3)
        rollout, train = ray.get([handle.calls.remote() for handle in handles])
    finally:
        for handle in handles:
            ray.kill(handle)
    assert [result.step for result in results] == [0, 1, 2]
    assert [arg for _, arg, _, _ in train] == [0, 1, 2]
    rollout_end = {arg: end for call, arg, _, end in rollout if call == "run"}
    train_start = {arg: start for _, arg, start, _ in train}
    assert train_start[1] < rollout_end[0] and train_start[2] < rollout_end[1]


@ray.remote(num_cpus=0)
class FailingRolloutWorker:
    """A rollout rank whose step 2 fails at once."""

    def run_steps(self, steps: list[int]) -> list[dict[str, float]]:
        if steps[0] == 2:
            raise ValueError("rollout step 2 failed")
        return [{"timing_s/generate": 0.0, "timing_s/receive_weights": 0.0}]


def test_a_rollout_step_run_ahead_that_fails_is_raised_while_an_earlier_step_waits(ray_runtime: None) -> None:
    # Training step 1 waits (as a real one does in its weight send, for the rollout step that receives those
    # weights); rollout step 2, run ahead, failed: the driver raises its error instead of waiting for step 1.
    handles: list[Any] = [FailingRolloutWorker.remote(), LoggingWorker.remote(True, 30.0)]
    try:
        start = time.monotonic()
        with pytest.raises(ValueError, match="rollout step 2 failed"):
            _driver(handles, 1).run_steps([1, 2], horizon=10)
        assert time.monotonic() - start < 20.0
    finally:
        for handle in handles:
            ray.kill(handle)


def test_synchronous_or_colocated_settings_are_refused() -> None:
    workers: list[Any] = [object(), object()]
    with pytest.raises(ValueError, match="max_staleness >= 1, got 0; use Driver for 0"):
        _driver(workers, 0)
    with pytest.raises(ValueError, match="needs rollout ranks and training ranks"):
        PipelinedDriver(workers, 30.0, rollout_ranks=[0, 1], nodes={}, receive_node="r", max_staleness=1)
