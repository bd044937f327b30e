"""The TaskScheduler end to end: single and multi-graph plans by hand, priority order, rejections, determinism."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from rl_core.graph import DuplicateGraphError, GraphError, get_pipeline
from rl_runtime.planning import (
    APPORTION_STRATEGIES,
    InsufficientSlotsError,
    PlanningError,
    SchedulerConfig,
    TaskScheduler,
)

from ._graphs import chain, two_agent_graph


def _ranks(placement: object) -> dict[str, tuple[int, ...]]:
    return {p.subgraph_id: p.ranks for p in placement.subgraphs}  # type: ignore[attr-defined]


def test_one_irreducible_graph_gets_every_slot() -> None:
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(get_pipeline("grpo"))
    assert _ranks(placement) == {"grpo": (0, 1)}
    assert [(w.rank, w.dp.rank, w.dp.size, w.graph.graph_id) for w in placement.workers] == [
        (0, 0, 2, "grpo"),
        (1, 1, 2, "grpo"),
    ]
    assert placement.cross_dependencies == ()


def test_multi_graph_plan_param_aware() -> None:
    # Sub-graphs by weight: ma/1 7000, ma/2 3000, ma/0 1000, grpo 0; shares (4, 2, 1, 1) (see test_apportion).
    # Cohesive and balanced: ma/1 fills node 0, the rest go on node 1.
    placement = TaskScheduler(SchedulerConfig(num_nodes=2, slots_per_node=4)).schedule(
        [two_agent_graph(), get_pipeline("grpo")]
    )
    assert [p.subgraph_id for p in placement.subgraphs] == ["ma/1", "ma/2", "ma/0", "grpo"]
    assert _ranks(placement) == {"ma/1": (0, 1, 2, 3), "ma/2": (4, 5), "ma/0": (6,), "grpo": (7,)}
    assert [p.weight for p in placement.subgraphs] == [7000, 3000, 1000, 0]
    assert [p.source_graph_id for p in placement.subgraphs] == ["ma", "ma", "ma", "grpo"]
    worker = placement.worker(5)
    assert (worker.node_index, worker.local_slot, worker.dp.rank, worker.dp.size) == (1, 1, 1, 2)
    assert worker.graph.graph_id == "ma/2" and list(worker.graph.nodes) == ["b_train"]
    assert {(d.upstream_graph, d.downstream_graph) for d in placement.cross_dependencies} == {
        ("ma/0", "ma/1"),
        ("ma/0", "ma/2"),
    }


def test_multi_graph_plan_even() -> None:
    config = SchedulerConfig(num_nodes=2, slots_per_node=4, strategy="even")
    placement = TaskScheduler(config).schedule([two_agent_graph(), get_pipeline("grpo")])
    # Two each; node 0 takes ma/1 and, being fuller of weight after ma/2 and ma/0 went to node 1, grpo.
    assert _ranks(placement) == {"ma/1": (0, 1), "ma/2": (4, 5), "ma/0": (6, 7), "grpo": (2, 3)}


def test_colocate_keeps_each_graph_whole() -> None:
    config = SchedulerConfig(num_nodes=1, slots_per_node=3, colocate=True)
    placement = TaskScheduler(config).schedule([two_agent_graph(), chain("c", 2, 1)])
    assert _ranks(placement) == {"ma": (0, 1), "c": (2,)}  # weights 11000 and 1: quotas 2.9997 and 0.0003
    assert [role.value for role in placement.subgraph("ma").roles] == ["rollout", "reward", "actor"]
    assert placement.cross_dependencies == ()


def test_equal_weights_order_by_length_then_plan_order() -> None:
    config = SchedulerConfig(num_nodes=1, slots_per_node=5, strategy="even")
    placement = TaskScheduler(config).schedule([chain("short", 2), chain("long", 4), chain("other", 2)])
    assert [p.subgraph_id for p in placement.subgraphs] == ["long", "short", "other"]
    assert _ranks(placement) == {"long": (0, 1), "short": (2, 3), "other": (4,)}


def test_param_aware_without_param_counts_is_even(caplog: pytest.LogCaptureFixture) -> None:
    plan = [chain("a", 1), chain("b", 1), chain("c", 1)]
    with caplog.at_level(logging.INFO, logger="rl_runtime.planning._apportion"):
        placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=7)).schedule(plan)
    assert [len(p.ranks) for p in placement.subgraphs] == [3, 2, 2]
    assert "no sub-graph declares a param_count" in caplog.text


def test_too_few_slots() -> None:
    with pytest.raises(
        InsufficientSlotsError,
        match=r"splits into 3 sub-graphs \(ma/1, ma/2, ma/0\) but the scheduler has 2 slots "
        r"\(planner\.scheduler\.num_nodes=1 x slots_per_node=2\).*give at least 3 slots",
    ):
        TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(two_agent_graph())


def test_duplicate_graph_ids() -> None:
    with pytest.raises(DuplicateGraphError, match=r"plan items 0 and 1 share graph id 'grpo'"):
        TaskScheduler(SchedulerConfig(slots_per_node=2)).schedule([get_pipeline("grpo"), get_pipeline("grpo")])


def test_empty_plan() -> None:
    with pytest.raises(GraphError, match="a plan needs at least one TaskGraph"):
        TaskScheduler().schedule([])


def test_wrong_config_type() -> None:
    with pytest.raises(PlanningError, match="TaskScheduler takes a SchedulerConfig, got dict"):
        TaskScheduler({"num_nodes": 1})  # type: ignore[arg-type]


def test_a_registered_strategy_must_return_valid_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(APPORTION_STRATEGIES, "greedy", lambda weights, slots: (slots, 0))
    config = SchedulerConfig(num_nodes=1, slots_per_node=3, strategy="greedy")
    with pytest.raises(PlanningError, match=r"strategy 'greedy' returned \(3, 0\); it must return a tuple of 2 ints"):
        TaskScheduler(config).schedule([chain("a", 1), chain("b", 1)])


_IN_ANOTHER_PROCESS = """
from rl_core.graph import get_pipeline
from rl_runtime.planning import SchedulerConfig, TaskScheduler
from tests.planning._graphs import two_agent_graph, chain
plan = [two_agent_graph(), get_pipeline("ppo"), chain("c", 3, 500)]
print(TaskScheduler(SchedulerConfig(num_nodes=3, slots_per_node=4, node_cohesion=False)).schedule(plan).describe())
"""


def test_same_placement_in_every_process() -> None:
    """String hashing differs between processes; the placement must not (every worker computes the same one)."""
    plan = [two_agent_graph(), get_pipeline("ppo"), chain("c", 3, 500)]
    here = TaskScheduler(SchedulerConfig(num_nodes=3, slots_per_node=4, node_cohesion=False)).schedule(plan)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    outputs = [
        subprocess.run(
            [sys.executable, "-c", _IN_ANOTHER_PROCESS],
            env={**os.environ, "PYTHONHASHSEED": seed, "RAY_AUTH_MODE": "disabled"},
            cwd=package_root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    ]
    assert outputs == [here.describe(), here.describe()]
