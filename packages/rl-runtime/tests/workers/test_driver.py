"""The Driver against stand-in worker actors whose step can succeed, fail, hang or run slow, rank by rank."""

from __future__ import annotations

import pickle
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
import ray.cloudpickle

from rl_runtime.workers import Driver, NodeExecutionError, WorkerLostError
from rl_runtime.workers._errors import StepTimeoutError

# Worker processes cannot import this test module; ship the actor class by value instead of by name.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

HEALTH = "health"
HOLD_S = 60.0  # how long a "hold" step waits for release(); far past every bound a test checks
SLOW_S = 1.5  # a "slow" step: finishes after faster ranks and after a poll of the driver
TIMEOUT_S = 30.0


@ray.remote(num_cpus=0, concurrency_groups={HEALTH: 2})
class StandInWorker:
    """Answers `run_step` as `configure` says: "ok", "slow", "hold" (until `release`), "node_error", "key_error"."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.behaviour = "ok"
        self.released = threading.Event()
        self.held: threading.Event | None = None  # the `released` event of the last "hold" step that finished

    @ray.method(concurrency_group=HEALTH)
    def configure(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.released = threading.Event()

    @ray.method(concurrency_group=HEALTH)
    def release(self) -> None:
        self.released.set()

    @ray.method(concurrency_group=HEALTH)
    def ping(self) -> int:
        return self.rank

    @ray.method(concurrency_group=HEALTH)
    def finished_holding(self) -> bool:
        """Whether a "hold" step has finished since `configure` (if not, a fault reported now came before it)."""
        return self.held is self.released

    def run_step(self, step: int) -> dict[str, float]:
        if self.behaviour == "hold":
            released = self.released
            released.wait(HOLD_S)
            self.held = released
        elif self.behaviour == "slow":
            time.sleep(SLOW_S)
        elif self.behaviour == "node_error":
            raise NodeExecutionError(self.rank, "train", step, "Traceback (most recent call last):\nValueError: boom")
        elif self.behaviour == "key_error":
            raise KeyError(f"boom on rank {self.rank}")
        return {
            "fake/rank": float(self.rank),
            "fake/step": float(step),
            "fake/items_count": 2.0,
            "timing_s/train": 0.1 * (self.rank + 1),
        }

    def run_steps(self, steps: list[int]) -> list[dict[str, float]]:
        return [self.run_step(step) for step in steps]


@pytest.fixture(scope="module")
def workers(ray_runtime: None) -> Iterator[list[Any]]:
    actors = [StandInWorker.remote(rank) for rank in range(3)]
    ray.get([actor.ping.remote() for actor in actors])
    yield actors
    for actor in actors:
        ray.kill(actor)


def _configure(workers: list[Any], *behaviours: str) -> None:
    ray.get([worker.configure.remote(b) for worker, b in zip(workers, behaviours, strict=True)])


def _release(workers: list[Any]) -> None:
    ray.get([worker.release.remote() for worker in workers])


def test_metrics_come_back_by_rank_merged_and_their_bytes_counted(workers: list[Any]) -> None:
    _configure(workers, "slow", "ok", "ok")  # rank 0 finishes last, after a poll has fetched ranks 1 and 2
    result = Driver(workers, TIMEOUT_S).run_step(7)
    assert result.step == 7
    assert [metrics["fake/rank"] for metrics in result.per_rank] == [0.0, 1.0, 2.0]
    assert all(metrics["fake/step"] == 7.0 for metrics in result.per_rank)
    assert result.metrics["fake/rank"] == pytest.approx(1.0)  # (0 + 1 + 2) / 3
    assert result.metrics["fake/items_count"] == 6.0  # counts add up over ranks
    assert result.metrics["timing_s/train"] == pytest.approx(0.3)  # the slowest rank's
    assert result.received_bytes == len(pickle.dumps(result.per_rank, protocol=pickle.HIGHEST_PROTOCOL))
    assert result.received_bytes < 1024  # three small dicts


def test_several_steps_in_one_call_come_back_step_by_step(workers: list[Any]) -> None:
    _configure(workers, "ok", "slow", "ok")
    results = Driver(workers, TIMEOUT_S).run_steps([3, 4, 5])
    assert [result.step for result in results] == [3, 4, 5]
    for result in results:
        assert [metrics["fake/step"] for metrics in result.per_rank] == [float(result.step)] * 3
        assert result.metrics["fake/items_count"] == 6.0
        assert result.received_bytes == len(pickle.dumps(result.per_rank, protocol=pickle.HIGHEST_PROTOCOL))


def test_several_steps_time_out_with_their_range_named(workers: list[Any]) -> None:
    _configure(workers, "ok", "hold", "ok")
    try:
        with pytest.raises(
            StepTimeoutError, match=r"steps 5-6: worker rank\(s\) 1 are alive but did not finish within 2 s"
        ):
            Driver(workers, 1.0).run_steps([5, 6])
    finally:
        _release(workers)


def test_no_steps_is_refused(workers: list[Any]) -> None:
    with pytest.raises(ValueError, match="run_steps needs at least one step"):
        Driver(workers, TIMEOUT_S).run_steps([])


def test_node_error_surfaces_while_another_rank_still_runs(workers: list[Any]) -> None:
    _configure(workers, "ok", "node_error", "hold")
    try:
        with pytest.raises(NodeExecutionError, match=r"node 'train' failed on worker rank 1 at step 3") as info:
            Driver(workers, TIMEOUT_S).run_step(3)
        assert not ray.get(workers[2].finished_holding.remote())  # reported while rank 2 still ran
    finally:
        _release(workers)
    assert (info.value.rank, info.value.step) == (1, 3)
    assert "ValueError: boom" in info.value.traceback_text


def test_of_several_failed_ranks_the_lowest_is_named(workers: list[Any]) -> None:
    _configure(workers, "ok", "node_error", "node_error")  # all finish within the first poll
    with pytest.raises(NodeExecutionError, match=r"worker rank 1 at step 4"):
        Driver(workers, TIMEOUT_S).run_step(4)


def test_other_worker_exceptions_pass_through(workers: list[Any]) -> None:
    _configure(workers, "ok", "ok", "key_error")
    with pytest.raises(KeyError, match=r"boom on rank 2"):
        Driver(workers, TIMEOUT_S).run_step(0)


def test_live_stragglers_time_out_and_finished_ranks_are_not_named(workers: list[Any]) -> None:
    _configure(workers, "ok", "hold", "hold")
    try:
        with pytest.raises(
            StepTimeoutError, match=r"step 5: worker rank\(s\) 1, 2 are alive but did not finish within 2 s"
        ):
            Driver(workers, 2.0).run_step(5)
    finally:
        _release(workers)


def test_a_dead_rank_is_reported_while_another_still_runs(workers: list[Any]) -> None:
    doomed = StandInWorker.remote(1)
    ray.get(doomed.ping.remote())
    ray.kill(doomed)
    _configure(workers, "hold", "ok", "ok")
    try:
        with pytest.raises(WorkerLostError, match=r"worker rank 1 was lost during step 2: its actor died"):
            Driver([workers[0], doomed], TIMEOUT_S).run_step(2)
        assert not ray.get(workers[0].finished_holding.remote())  # reported while rank 0 still ran
    finally:
        _release(workers)


@pytest.mark.parametrize(
    ("workers_arg", "timeout", "message"),
    [
        ([], 1.0, r"Driver needs at least one worker"),
        (["w"], 0, r"timeout_s must be a number of seconds > 0, got 0"),
        (["w"], True, r"timeout_s must be a number of seconds > 0, got True"),
        (["w"], "5", r"timeout_s must be a number of seconds > 0, got '5'"),
    ],
)
def test_driver_rejects_no_workers_and_bad_timeouts(workers_arg: list[Any], timeout: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Driver(workers_arg, timeout)
