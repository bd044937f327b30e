"""The `rebalance` operation: 2 real Ray workers with skewed lengths meet through the DataCoordinator and come out
with the hand-computed partitions and verl's `global_seqlen/*`; padding, pass-through, `with_rebalance`, errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
import ray.cloudpickle
import torch

from rl_core.graph import GraphError, Node, NodeRole, TaskGraph, get_pipeline
from rl_runtime.config import RankBalancing
from rl_runtime.metrics import reduce_rank_metrics
from rl_runtime.nodes._rebalance import (
    REBALANCE_OPERATION,
    rank_seqlen_metrics,
    rebalance,
    with_rebalance,
)
from rl_runtime.nodes._rollout_batch import PAD_ID
from rl_runtime.planning import SchedulerConfig, TaskScheduler
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import (
    NodeContext,
    NodeExecutionError,
    StepData,
    StepDataError,
    register_operation,
    run_steps,
    start_workers,
)

# Worker processes cannot import this test module; ship its operations by value instead of by name.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

PROMPT_LEN = 1
UID_STEP_STRIDE = 1000
UID_RANK_STRIDE = 100
ADVANTAGE_OFFSET = 0.5
"""Sample u's advantages are u + 0.5 on its response tokens: computed before balancing, they must travel with it."""
TIMEOUT_S = 60.0
COORDINATOR_TIMEOUT_S = 30.0
READY_BOUND_S = 600.0
"""How long starting the workers may take: a bound for a failing run only. Ray starts them at niceness 15, and
with both cores busy at normal priority starting two took over 120 s here."""
SEQLEN_NAMES = ("min", "max", "minmax_diff", "balanced_min", "balanced_max", "mean")

# Step 0: two long samples on rank 0, two short on rank 1. Of the three ways to pair them up, only
# {100, 10} / {90, 20} (110 / 110 tokens) is balanced.
PAIRS = [[100, 90], [10, 20]]
# Four samples per rank (groups of two when asked): rank 0 holds 180 tokens, rank 1 holds 24.
SKEWED = [[60, 50, 40, 30], [10, 8, 4, 2]]


def uid(step: int, rank: int, index: int) -> int:
    return step * UID_STEP_STRIDE + rank * UID_RANK_STRIDE + index


def skewed_batch(step: int, rank: int, lengths: list[int], group_size: int) -> StepData:
    """Rows `[prompt | response | padding]` of the given total lengths; sample u's tokens are all u."""
    n, width = len(lengths), max(lengths, default=1)
    uids = [uid(step, rank, i) for i in range(n)]
    input_ids = torch.full((n, width), PAD_ID, dtype=torch.int64)
    attention_mask = torch.zeros((n, width), dtype=torch.int64)
    response_mask = torch.zeros((n, width), dtype=torch.int64)
    advantages = torch.zeros((n, width), dtype=torch.float32)
    for row, (u, length) in enumerate(zip(uids, lengths, strict=True)):
        input_ids[row, :length] = u
        attention_mask[row, :length] = 1
        response_mask[row, PROMPT_LEN:length] = 1
        advantages[row, PROMPT_LEN:length] = u + ADVANTAGE_OFFSET
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "response_mask": response_mask,
        "advantages": advantages,
        "uid": torch.tensor(uids, dtype=torch.int64),
        "group_id": torch.tensor([uid(step, rank, i // group_size) for i in range(n)], dtype=torch.int64),
        "prompt_len": torch.full((n,), PROMPT_LEN, dtype=torch.int64),
        "response_len": torch.tensor([length - PROMPT_LEN for length in lengths], dtype=torch.int64),
    }
    return StepData(batch, {"text": [f"s{u}" for u in uids]})


@register_operation("rebalance_test_rollout")
def rebalance_test_rollout(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """`skewed_batch` of `params.lengths[step][rank]`, in groups of `params.group_sizes[step][rank]`."""
    lengths = list(ctx.node.params["lengths"][ctx.step][ctx.dp.rank])
    return skewed_batch(ctx.step, ctx.dp.rank, lengths, int(ctx.node.params["group_sizes"][ctx.step][ctx.dp.rank]))


def _intact(data: StepData) -> bool:
    batch = data.batch
    for row, u in enumerate(batch["uid"].tolist()):
        length = int(batch["prompt_len"][row] + batch["response_len"][row])
        tokens = batch["input_ids"][row]
        response = torch.zeros_like(tokens, dtype=torch.bool)
        response[PROMPT_LEN:length] = True
        if not (
            int(batch["attention_mask"][row].sum()) == length
            and bool((tokens[:length] == u).all() and (tokens[length:] == PAD_ID).all())
            and torch.equal(batch["response_mask"][row].bool(), response)
            and bool((batch["advantages"][row][response] == u + ADVANTAGE_OFFSET).all())
            and bool((batch["advantages"][row][~response] == 0).all())
            and data.extras["text"][row] == f"s{u}"
        ):
            return False
    return True


@register_operation("rebalance_test_report")
def rebalance_test_report(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Which uids this rank holds (`test/uid/<u>`), its tokens, width, row order and whether every row is intact."""
    (data,) = inputs.values()
    uids = data.batch["uid"].tolist()
    metrics = {f"test/uid/{u}": 1.0 for u in uids}
    metrics["test/token_sum"] = float(data.batch["attention_mask"].sum())
    metrics["test/width"] = float(data.batch["input_ids"].shape[1])
    metrics["test/longest"] = float((data.batch["prompt_len"] + data.batch["response_len"]).max())
    metrics["test/sorted"] = float(uids == sorted(uids))
    metrics["test/intact"] = float(_intact(data))
    return StepData(metrics=metrics)


def _graph(lengths: list[Any], group_sizes: list[Any], keep_groups: bool) -> TaskGraph:
    return TaskGraph(
        "rebalance_test",
        [
            Node(
                "rollout",
                "rebalance_test_rollout",
                params={"lengths": lengths, "group_sizes": group_sizes},
            ),
            Node(
                "rebalance",
                REBALANCE_OPERATION,
                dependencies=("rollout",),
                params={"keep_groups": keep_groups},
            ),
            Node("report", "rebalance_test_report", dependencies=("rebalance",)),
        ],
    )


@pytest.fixture
def coordinator(ray_runtime: None) -> Iterator[Any]:
    import ray

    from rl_coordinator.coordinator import start_coordinator

    handle = start_coordinator()
    yield handle
    ray.kill(handle)


@contextmanager
def _workers(graph: TaskGraph, coordinator: Any) -> Iterator[list[Any]]:
    import ray

    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(graph)
    workers = start_workers(
        placement, coordinator=coordinator, coordinator_timeout_s=COORDINATOR_TIMEOUT_S, ready_timeout_s=READY_BOUND_S
    )
    try:
        yield workers
    finally:
        for worker in workers:
            ray.kill(worker)


def _uids(metrics: Mapping[str, float]) -> frozenset[int]:
    return frozenset(int(name.rsplit("/", 1)[1]) for name in metrics if name.startswith("test/uid/"))


def _seqlen(metrics: Mapping[str, float]) -> dict[str, float]:
    return {name: metrics[f"global_seqlen/{name}"] for name in SEQLEN_NAMES}


def _check_rows(per_rank: tuple[dict[str, float], ...], step: int, lengths: list[list[int]]) -> None:
    """Every uid of the step on exactly one rank, rows intact and in uid order, padding trimmed."""
    held = [_uids(metrics) for metrics in per_rank]
    assert held[0].isdisjoint(held[1])
    assert held[0] | held[1] == {uid(step, r, i) for r, row in enumerate(lengths) for i in range(len(row))}
    assert [len(uids) for uids in held] == [len(lengths[0])] * 2
    for metrics in per_rank:
        assert metrics["test/intact"] == 1.0 and metrics["test/sorted"] == 1.0
        assert metrics["test/width"] == metrics["test/longest"]


def test_two_ranks_get_the_balanced_partition_sample_by_sample(coordinator: Any) -> None:
    graph = _graph([PAIRS, SKEWED], [[1, 1], [1, 1]], keep_groups=False)
    with _workers(graph, coordinator) as workers:
        step0, step1 = run_steps(workers, 2, TIMEOUT_S)

    _check_rows(step0.per_rank, 0, PAIRS)
    expected = {frozenset({uid(0, 0, 0), uid(0, 1, 0)}), frozenset({uid(0, 0, 1), uid(0, 1, 1)})}  # 100+10, 90+20
    assert {_uids(metrics) for metrics in step0.per_rank} == expected
    assert [metrics["test/token_sum"] for metrics in step0.per_rank] == [110.0, 110.0]
    # Before: 190 and 30 tokens per rank; after: 110 and 110; mean 220 / 2.
    assert _seqlen(step0.metrics) == {
        "min": 30.0,
        "max": 190.0,
        "minmax_diff": 160.0,
        "balanced_min": 110.0,
        "balanced_max": 110.0,
        "mean": 110.0,
    }

    # 204 tokens can split 102 / 102 with four samples each (e.g. 60+30+8+4), and the node finds such a split.
    _check_rows(step1.per_rank, 1, SKEWED)
    assert [metrics["test/token_sum"] for metrics in step1.per_rank] == [102.0, 102.0]
    assert _seqlen(step1.metrics) == {
        "min": 24.0,
        "max": 180.0,
        "minmax_diff": 156.0,
        "balanced_min": 102.0,
        "balanced_max": 102.0,
        "mean": 102.0,
    }


def test_groups_stay_whole_when_asked(coordinator: Any) -> None:
    graph = _graph([SKEWED], [[2, 2]], keep_groups=True)
    with _workers(graph, coordinator) as workers:
        (result,) = run_steps(workers, 1, TIMEOUT_S)

    _check_rows(result.per_rank, 0, SKEWED)
    # Groups {60, 50}=110, {40, 30}=70, {10, 8}=18, {4, 2}=6, two per rank: the pairings give 180/24, 128/76 and
    # 116/88, so the best keeps {60, 50, 4, 2} together and {40, 30, 10, 8} together.
    group_110, group_70 = {uid(0, 0, 0), uid(0, 0, 1)}, {uid(0, 0, 2), uid(0, 0, 3)}
    group_18, group_6 = {uid(0, 1, 0), uid(0, 1, 1)}, {uid(0, 1, 2), uid(0, 1, 3)}
    expected = {frozenset(group_110 | group_6), frozenset(group_70 | group_18)}
    assert {_uids(metrics) for metrics in result.per_rank} == expected
    assert sorted(metrics["test/token_sum"] for metrics in result.per_rank) == [88.0, 116.0]
    assert _seqlen(result.metrics) == {
        "min": 24.0,
        "max": 180.0,
        "minmax_diff": 156.0,
        "balanced_min": 88.0,
        "balanced_max": 116.0,
        "mean": 102.0,
    }


def test_groups_of_different_sizes_stop_the_step_with_the_coordinators_reason(coordinator: Any) -> None:
    graph = _graph([[[5, 5], [5, 5]]], [[2, 1]], keep_groups=True)  # one group of 2 on rank 0, two of 1 on rank 1
    with _workers(graph, coordinator) as workers, pytest.raises(NodeExecutionError) as caught:
        run_steps(workers, 1, TIMEOUT_S)
    assert caught.value.node_id == "rebalance"
    assert "the coordinator could not partition the step" in caught.value.traceback_text
    assert "needs every group to have the same size" in caught.value.traceback_text


# --- in this process: one rank, padding, metrics, errors ---------------------------------------------------------


def _context(size: int, coordinator: Any = None, **params: object) -> NodeContext:
    node = Node("rebalance", REBALANCE_OPERATION, dependencies=("rollout",), params=params)
    return NodeContext(node, 0, DataParallelInfo(0, size), 0, None, coordinator)


def test_one_rank_passes_the_batch_through_with_its_metrics() -> None:
    data = skewed_batch(0, 0, [7, 5, 6], group_size=1)
    output = rebalance(_context(1), {"rollout": data})
    assert dict(output.batch) == dict(data.batch) and dict(output.extras) == dict(data.extras)
    assert _seqlen(output.metrics) == {
        "min": 18.0,
        "max": 18.0,
        "minmax_diff": 0.0,
        "balanced_min": 18.0,
        "balanced_max": 18.0,
        "mean": 18.0,
    }


def test_rank_reports_reduce_to_verls_global_seqlen() -> None:
    # Three ranks held 50, 10, 30 tokens and hold 30, 31, 29 after: verl's figures over the whole batch.
    merged = reduce_rank_metrics(
        [rank_seqlen_metrics(50, 30), rank_seqlen_metrics(10, 31), rank_seqlen_metrics(30, 29)]
    )
    assert _seqlen(merged) == {
        "min": 10.0,
        "max": 50.0,
        "minmax_diff": 40.0,
        "balanced_min": 29.0,
        "balanced_max": 31.0,
        "mean": 30.0,
    }


@pytest.mark.parametrize(
    ("data", "params", "coordinator", "message"),
    [
        (
            skewed_batch(0, 0, [], group_size=1),
            {},
            None,
            r"got no samples on data-parallel rank 0; every one of the 2 ranks must hold the same number of samples",
        ),
        (
            StepData({"uid": torch.tensor([1, 2])}),
            {},
            None,
            r"needs batch fields \['prompt_len', 'response_len'\], which no upstream node produced",
        ),
        (
            StepData({"uid": torch.tensor([1]), "prompt_len": torch.tensor([1]), "response_len": torch.tensor([1])}),
            {"keep_groups": True},
            None,
            r"needs batch fields \['group_id'\]",
        ),
        (skewed_batch(0, 0, [5], 1), {"keep_group": True}, None, r"unknown params \['keep_group'\] \(did you mean"),
        (skewed_batch(0, 0, [5], 1), {"keep_groups": "yes"}, None, r"params.keep_groups must be true or false"),
        (skewed_batch(0, 0, [5], 1), {}, None, r"this worker has none; start the workers with coordinator="),
        (
            skewed_batch(0, 0, [5], 1),
            {"workload": "token"},
            object(),  # never reached: the settings are refused first
            r"node 'rebalance' params: unknown workload 'token' \(did you mean 'tokens'\?\)",
        ),
    ],
)
def test_bad_inputs_are_refused_before_any_sample_moves(
    data: StepData, params: dict[str, object], coordinator: Any, message: str
) -> None:
    with pytest.raises(StepDataError, match=message):
        rebalance(_context(2, coordinator, **params), {"rollout": data})


def test_rebalance_takes_exactly_one_input() -> None:
    data = skewed_batch(0, 0, [5], group_size=1)
    with pytest.raises(StepDataError, match=r"takes the batch of exactly one upstream node, got 2 \(a, b\)"):
        rebalance(_context(2), {"a": data, "b": data})


# --- with_rebalance ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pipeline", "balancing"), [("grpo", RankBalancing.SAMPLES), ("ppo", RankBalancing.GROUPS)])
def test_with_rebalance_goes_between_the_advantages_and_the_actor(pipeline: str, balancing: RankBalancing) -> None:
    source = get_pipeline(pipeline)
    graph = with_rebalance(source, balancing)
    node = graph["rebalance"]
    assert node.operation == REBALANCE_OPERATION and node.role is NodeRole.ACTOR
    assert node.dependencies == ("calculate_advantages",)
    assert node.params == {"keep_groups": balancing is RankBalancing.GROUPS}
    assert graph.successors("calculate_advantages") == ("rebalance",)
    assert graph["actor_old_log_prob"].dependencies == ("rebalance",)
    order = list(graph.topological_order)
    assert order.index("rebalance") == order.index("calculate_advantages") + 1
    assert set(graph.nodes) - {"rebalance"} == set(source.nodes)
    assert with_rebalance(source, RankBalancing.NONE) is source


def test_with_rebalance_after_a_named_node() -> None:
    graph = with_rebalance(get_pipeline("grpo"), RankBalancing.GROUPS, after="function_reward")
    assert graph["rebalance"].dependencies == ("function_reward",)
    assert graph["calculate_advantages"].dependencies == ("rebalance",)


def test_with_rebalance_refuses_what_it_cannot_place() -> None:
    grpo = get_pipeline("grpo")
    with pytest.raises(GraphError, match=r"has no node 'function_rewrd' to rebalance after \(did you mean"):
        with_rebalance(grpo, RankBalancing.SAMPLES, after="function_rewrd")
    lone = TaskGraph("lone", [Node("rollout", "generate")])
    with pytest.raises(GraphError, match=r"has 0 'compute_advantage' nodes \(none\); pass after=<node id>"):
        with_rebalance(lone, RankBalancing.SAMPLES)
    with pytest.raises(GraphError, match=r"already has a node 'rebalance'; add only one"):
        with_rebalance(with_rebalance(grpo, RankBalancing.SAMPLES), RankBalancing.SAMPLES)
    with pytest.raises(GraphError, match=r"balancing must be a RankBalancing"):
        with_rebalance(grpo, "samples")  # type: ignore[arg-type]
