"""GraphExecutor in this process (no Ray): local edges, async operations, resources, faults."""

from __future__ import annotations

import pytest

from rl_core.graph import TaskGraph
from rl_runtime.planning import SchedulerConfig, TaskScheduler
from rl_runtime.workers import NodeExecutionError, plan_routes
from rl_runtime.workers._errors import RoutingError, UnknownOperationError
from rl_runtime.workers._executor import GraphExecutor

from ._fakes import FakeResources, chain_graph, fake_uids, merge_graph, node


def _executor(graph: TaskGraph, resources: object = None) -> GraphExecutor:
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=1, colocate=True)).schedule(graph)
    return GraphExecutor(placement.worker(0), plan_routes(placement, 0), resources)


def test_chain_runs_in_order_and_keeps_uids_and_values() -> None:
    executor = _executor(chain_graph(3, 4))
    for step in (0, 1):
        metrics = executor.run_step(step)
        uids = fake_uids(step, 0, 3)
        assert metrics["fake/generated"] == 3.0 and metrics["fake/scaled"] == 3.0
        assert metrics["fake/scale/uid_count"] == 3.0 and metrics["fake/scale/uid_sum"] == float(sum(uids))
        assert metrics["fake/scale/intact"] == 1.0
        assert {"timing_s/generate", "timing_s/scale", "timing_s/check"} <= set(metrics)
    assert len(executor._store) == 0  # every local batch was taken by its consumer


def test_async_operation_and_resources() -> None:
    graph = TaskGraph(
        "g",
        [
            node("generate", "fake_generate", num_samples=5, width=1),
            node("count", "fake_async_count", ("generate",)),
            node("resource", "fake_read_resource"),
        ],
    )
    executor = _executor(graph, FakeResources(scale=3))
    metrics = executor.run_step(0)
    executor.close()
    assert metrics["fake/async_seen"] == 5.0 and metrics["fake/resource"] == 3.0 and metrics["fake/rank"] == 0.0


def test_failing_node_names_rank_node_step_and_traceback() -> None:
    executor = _executor(TaskGraph("g", [node("ok", "fake_fail", fail_at=1)]))
    assert executor.run_step(0) == {"fake/ok": 1.0, "timing_s/ok": pytest.approx(0.0, abs=1.0)}
    with pytest.raises(NodeExecutionError, match=r"node 'ok' failed on worker rank 0 at step 1") as info:
        executor.run_step(1)
    assert (info.value.rank, info.value.node_id, info.value.step) == (0, "ok", 1)
    assert (
        "ValueError: fake failure at step 1" in info.value.traceback_text and "fake_fail" in info.value.traceback_text
    )


def test_an_operation_returning_a_dict_is_a_node_error() -> None:
    executor = _executor(TaskGraph("g", [node("bad", "fake_not_step_data")]))
    with pytest.raises(
        NodeExecutionError, match=r"StepDataError: operation 'fake_not_step_data' of node 'bad' returned"
    ):
        executor.run_step(0)


def test_a_batch_off_the_sample_schema_is_a_node_error() -> None:
    executor = _executor(TaskGraph("g", [node("ids", "fake_float_ids")]))
    with pytest.raises(
        NodeExecutionError,
        match=r"StepDataError: the batch of node 'ids' \(operation 'fake_float_ids'\): sample field 'input_ids' must "
        r"have dtype torch\.int64, torch\.int32, got torch\.float32",
    ):
        executor.run_step(0)


def test_unknown_operation_fails_when_built() -> None:
    with pytest.raises(UnknownOperationError, match=r"node 'x' uses operation 'fake_missing_operation'"):
        _executor(TaskGraph("g", [node("x", "fake_missing_operation")]))


def test_coordinator_edges_need_a_client() -> None:
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(merge_graph(2, 2))
    with pytest.raises(RoutingError, match=r"worker rank 0 has coordinator edges but no coordinator client"):
        GraphExecutor(placement.worker(0), plan_routes(placement, 0, 2), None)
