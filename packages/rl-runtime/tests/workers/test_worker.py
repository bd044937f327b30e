"""DAG workers as real Ray actors on 2 CPU slots, driven by the Driver: data paths, driver bytes, faults."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rl_coordinator.coordinator import METRIC_PUT_SAMPLES, METRIC_SERVED_SAMPLES, CoordinatorClient
from rl_core.graph import TaskGraph
from rl_runtime.planning import SchedulerConfig, TaskScheduler
from rl_runtime.workers import Driver, NodeExecutionError, WorkerLostError, WorkerResources, run_steps, start_workers
from rl_runtime.workers._errors import StepTimeoutError, UnknownOperationError, WorkerStartError
from rl_runtime.workers._gc_pauses import GC_TIMING
from rl_runtime.workers._worker import WORKER_NICENESS, build_failure

from ._fakes import chain_graph, fake_uids, merge_graph, node

SAMPLES = 4
WIDTH = 65_536  # 4 samples x 64 Ki float32 = 1 MiB of values per producer rank and step
DRIVER_BYTES_BOUND = 4_096  # metric dicts of two ranks; one batch is 1 MiB
TIMEOUT_S = 60.0
COORDINATOR_TIMEOUT_S = 30.0
READY_BOUND_S = 600.0
FROZEN_AT_LEAST = 50_000
"""A worker process holds a few hundred thousand objects once torch and Ray are imported (~370,000 seen)."""
"""How long starting the workers may take: a bound for a failing run only. Ray starts them at niceness 15, and
with both cores busy at normal priority starting two took over 120 s here."""


@pytest.fixture(scope="module")
def coordinator(ray_runtime: None) -> Iterator[Any]:
    import ray

    from rl_coordinator.coordinator import start_coordinator

    handle = start_coordinator()
    yield handle
    ray.kill(handle)  # the module leaves the shared Ray runtime as it found it


@contextmanager
def _workers(graph: TaskGraph, slots: int, coordinator: Any = None, **kwargs: Any) -> Iterator[list[Any]]:
    import ray

    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=slots)).schedule(graph)
    workers = start_workers(
        placement,
        coordinator=coordinator,
        coordinator_timeout_s=COORDINATOR_TIMEOUT_S,
        ready_timeout_s=READY_BOUND_S,
        **kwargs,
    )
    try:
        yield workers
    finally:
        for worker in workers:
            ray.kill(worker)


def test_same_layout_stays_local_and_coordinator_is_untouched(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    before = client.metrics()
    factory = lambda a: WorkerResources({"rank": a.rank})  # noqa: E731
    with _workers(chain_graph(SAMPLES, WIDTH), 2, coordinator, resources_factory=factory) as workers:
        results = run_steps(workers, 2, TIMEOUT_S)
    assert client.metrics()[METRIC_PUT_SAMPLES] == before[METRIC_PUT_SAMPLES]
    for result in results:
        assert result.received_bytes < DRIVER_BYTES_BOUND
        for dp_rank, metrics in enumerate(result.per_rank):
            assert metrics["fake/scale/uid_count"] == SAMPLES
            assert metrics["fake/scale/uid_sum"] == sum(fake_uids(result.step, dp_rank, SAMPLES))
            assert metrics["fake/scale/intact"] == 1.0
        assert result.metrics["fake/generated"] == SAMPLES  # a mean over ranks
        assert result.metrics["timing_s/generate"] == max(m["timing_s/generate"] for m in result.per_rank)
        assert all(m[GC_TIMING] >= 0.0 for m in result.per_rank)  # each step's time in garbage collections


def test_different_layouts_go_through_the_coordinator_and_keep_every_uid(coordinator: Any) -> None:
    client = CoordinatorClient(coordinator)
    before = client.metrics()
    graph = merge_graph(SAMPLES, WIDTH)
    with _workers(graph, 2, coordinator, edge_batch_sizes=SAMPLES) as workers:
        results = run_steps(workers, [0, 1], TIMEOUT_S)
    after = client.metrics()
    edges, steps = 2, 2  # generate->check and scale->check carry SAMPLES each per step
    assert after[METRIC_PUT_SAMPLES] - before[METRIC_PUT_SAMPLES] == edges * steps * SAMPLES
    assert after[METRIC_SERVED_SAMPLES] - before[METRIC_SERVED_SAMPLES] == edges * steps * SAMPLES
    for result in results:
        assert result.received_bytes < DRIVER_BYTES_BOUND
        uids = fake_uids(result.step, 0, SAMPLES)  # the producer sub-graph has one rank, dp rank 0
        checked = next(m for m in result.per_rank if "fake/scale/uid_sum" in m)
        for src in ("generate", "scale"):
            assert checked[f"fake/{src}/uid_count"] == SAMPLES
            assert checked[f"fake/{src}/uid_sum"] == sum(uids)
            assert checked[f"fake/{src}/intact"] == 1.0


def test_node_error_reaches_the_driver_with_rank_node_step_and_traceback(ray_runtime: None) -> None:
    graph = TaskGraph("g", [node("boom", "fake_fail", fail_at=1)])
    with _workers(graph, 1) as workers:
        driver = Driver(workers, TIMEOUT_S)
        assert driver.run_step(0).metrics["fake/ok"] == 1.0
        with pytest.raises(NodeExecutionError, match=r"node 'boom' failed on worker rank 0 at step 1") as info:
            driver.run_step(1)
    assert (info.value.rank, info.value.node_id, info.value.step) == (0, "boom", 1)
    assert "ValueError: fake failure at step 1" in info.value.traceback_text


def test_hung_worker_times_out_and_killed_worker_is_lost_within_the_timeout(ray_runtime: None) -> None:
    import ray

    graph = TaskGraph("g", [node("nap", "fake_sleep", seconds=20)])
    with _workers(graph, 2) as workers:
        with pytest.raises(StepTimeoutError, match=r"step 0: worker rank\(s\) 0, 1 are alive but did not finish"):
            Driver(workers, 1.0).run_step(0)  # both still sleep: the liveness check answers
        killer = threading.Timer(1.0, ray.kill, [workers[1]])
        start = time.monotonic()
        killer.start()
        with pytest.raises(WorkerLostError, match=r"worker rank 1 was lost during step 1: its actor died") as info:
            Driver(workers, 15.0).run_step(1)
        killer.join()
    assert info.value.rank == 1 and time.monotonic() - start < 15.0


def test_unknown_operation_fails_before_any_worker_starts(ray_runtime: None) -> None:
    graph = TaskGraph("g", [node("gen", "fake_generate", num_samples=1, width=1), node("x", "fake_nope", ("gen",))])
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=1)).schedule(graph)
    with pytest.raises(
        UnknownOperationError, match=r"node 'x' uses operation 'fake_nope'.*registered operations: .*fake_generate"
    ):
        start_workers(placement)


RAY_CREATION_FAILURE = """The actor died because of an error raised in its creation task, \
ray::DAGWorker.__init__() (pid=8168, ip=192.0.2.2, actor_id=49130cfb2351aeb66693239201000000, \
repr=<rl_runtime.workers._worker.DAGWorker object at 0x7f>)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/src/rl_runtime/trainer/_worker_state.py", line 214, in _prompts
    return loader, PromptTable.encode(task, loader.source, config.data.max_prompt_length)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/src/rl_runtime/nodes/_prompt_table.py", line 42, in encode_rows
    raise StepDataError(
rl_runtime.workers._errors.StepDataError: train.jsonl row 7 (line 8): the prompt has 63 tokens, more than \
data.max_prompt_length=32; raise max_prompt_length or remove the row
"""
"""Ray's text of a DAG worker whose resources factory raised (abridged from a real one: Ray keeps no exception
object for an actor's creation task, only this text)."""


def test_a_build_failure_reads_as_the_exception_the_build_raised() -> None:
    assert build_failure(RAY_CREATION_FAILURE) == (
        "StepDataError: train.jsonl row 7 (line 8): the prompt has 63 tokens, more than data.max_prompt_length=32; "
        "raise max_prompt_length or remove the row"
    )
    assert build_failure("the actor died unexpectedly (killed by the OOM killer)") == (
        "the actor died unexpectedly (killed by the OOM killer)"
    )


STUCK_S = 600.0
"""Longer than any test: a rank that sleeps this long stands for one waiting in a collective for a dead peer."""


def test_a_rank_failing_to_build_is_reported_while_another_still_waits(ray_runtime: None) -> None:
    def rank_1_fails_while_rank_0_waits(assignment: Any) -> WorkerResources[None]:  # nested: Ray ships it by value
        if assignment.rank == 1:
            raise RuntimeError("rank 1 could not load its model")
        time.sleep(STUCK_S)
        return WorkerResources(None)

    graph = TaskGraph("g", [node("gen", "fake_generate", num_samples=1, width=1)])
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(graph)
    start = time.monotonic()
    with pytest.raises(
        WorkerStartError, match=r"(?s)worker rank 1 failed to start: .*RuntimeError: rank 1 could not load its model"
    ):
        start_workers(placement, resources_factory=rank_1_fails_while_rank_0_waits, ready_timeout_s=STUCK_S)
    # Reported while rank 0 still sleeps (it sleeps STUCK_S after its process started), however slow the start.
    assert time.monotonic() - start < STUCK_S


READY_TIMEOUT_S = 2.0
"""The ready timeout of the test below; it is judged only once rank 0 is ready, so its size decides nothing."""


def test_a_rank_that_never_finishes_building_is_named_at_the_ready_timeout(
    ray_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    def rank_1_never_finishes(assignment: Any) -> WorkerResources[None]:
        if assignment.rank == 1:
            time.sleep(STUCK_S)
        return WorkerResources(None)

    # Decided by events, not by how fast the machine is: on a loaded machine rank 0 alone can take longer than
    # the timeout to start its process. So until rank 0's `ready` has answered, start_workers' wait for the ready
    # calls blocks without a timeout (rank 1 never answers, so the first answer is rank 0's); from then on the
    # timeout, counted from the start as always, is judged as start_workers asks.
    real_wait = ray.wait
    rank_0_ready = threading.Event()

    def wait_timing_out_only_after_rank_0_is_ready(refs: list[Any], **kwargs: Any) -> tuple[list[Any], list[Any]]:
        if rank_0_ready.is_set():
            return real_wait(refs, **kwargs)
        done, rest = real_wait(refs, **{**kwargs, "timeout": STUCK_S})
        if len(done) == 1 and ray.get(done[0]) == 0:
            rank_0_ready.set()
        return done, rest

    monkeypatch.setattr(ray, "wait", wait_timing_out_only_after_rank_0_is_ready)
    graph = TaskGraph("g", [node("gen", "fake_generate", num_samples=1, width=1)])
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(graph)
    with pytest.raises(WorkerStartError, match=r"worker rank\(s\) \[1\] did not finish building .* within 2 s"):
        start_workers(placement, resources_factory=rank_1_never_finishes, ready_timeout_s=READY_TIMEOUT_S)
    assert rank_0_ready.is_set()


def test_workers_run_at_normal_priority_where_the_os_allows_it(ray_runtime: None) -> None:
    graph = TaskGraph("g", [node("gen", "fake_generate", num_samples=1, width=1)])
    with _workers(graph, 2, retain_host_memory=True) as workers:
        import ray

        niceness = ray.get([worker.scheduling_niceness.remote() for worker in workers])
        retains = ray.get([worker.__ray_call__.remote(lambda self: self.retains_host_memory) for worker in workers])
        frozen = ray.get([worker.frozen_objects.remote() for worker in workers])
    # Each worker froze the objects of its build (torch, Ray, its resources) out of full garbage collections.
    assert min(frozen) > FROZEN_AT_LEAST
    assert retains == [sys.platform.startswith("linux")] * 2
    # Ray starts workers at niceness 15; only a privileged process may lower it (CI and dev machines run as root).
    expected = WORKER_NICENESS if os.geteuid() == 0 else 15
    assert niceness == [expected, expected]


def test_an_unprivileged_worker_keeps_its_niceness_without_failing() -> None:
    script = (
        "import os, resource\n"
        "from rl_runtime.workers._worker import raise_priority\n"
        "os.setpriority(os.PRIO_PROCESS, 0, 15)\n"
        "resource.setrlimit(resource.RLIMIT_NICE, (0, 0))\n"
        "if os.geteuid() == 0:\n"
        "    os.setuid(65534)\n"  # nobody: no CAP_SYS_NICE, and RLIMIT_NICE 0 allows no lowering
        "print(raise_priority())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "15"
