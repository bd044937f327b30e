"""Which edges stay local and which go through the coordinator, from a real placement."""

from __future__ import annotations

import pytest

from rl_runtime.planning import Placement, SchedulerConfig, TaskScheduler
from rl_runtime.workers import plan_routes
from rl_runtime.workers._errors import RoutingError
from rl_runtime.workers._routing import EdgeRoute, edge_key

from ._fakes import chain_graph, merge_graph


def _place(graph, slots: int) -> Placement:
    return TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=slots)).schedule(graph)


def test_edge_key() -> None:
    assert edge_key("rollout", "reward") == "rollout->reward"


def test_chain_on_two_ranks_is_all_local() -> None:
    placement = _place(chain_graph(2, 2), 2)
    for rank in (0, 1):
        routes = plan_routes(placement, rank)
        assert routes.inputs["scale"] == (EdgeRoute("generate->scale", "generate", "scale", True, 2, 2),)
        assert routes.outputs["scale"] == (EdgeRoute("scale->check", "scale", "check", True, 2, 2),)
        assert routes.inputs["generate"] == () and not routes.uses_coordinator


def test_split_graph_routes_cross_edges_through_the_coordinator() -> None:
    placement = _place(merge_graph(2, 2), 2)
    producer = placement.owner("merge", "generate").ranks[0]
    consumer = placement.owner("merge", "check").ranks[0]
    out = plan_routes(placement, producer, {"generate->check": 4, "scale->check": 4})
    assert out.outputs["generate"] == (
        EdgeRoute("generate->scale", "generate", "scale", True, 1, 1),
        EdgeRoute("generate->check", "generate", "check", False, 1, 1, 4),
    )
    assert out.outputs["scale"] == (EdgeRoute("scale->check", "scale", "check", False, 1, 1, 4),)
    assert "check" not in out.inputs and out.uses_coordinator
    into = plan_routes(placement, consumer, 4)
    assert [r.key for r in into.inputs["check"]] == ["generate->check", "scale->check"]
    assert all(not r.local and r.batch_size == 4 for r in into.inputs["check"])


def test_coordinator_edge_without_batch_size_is_refused() -> None:
    placement = _place(merge_graph(2, 2), 2)
    with pytest.raises(RoutingError, match=r"edge 'generate->check' goes through the coordinator .* got 0"):
        plan_routes(placement, 0, {"scale->check": 4})


def test_batch_size_must_split_over_consumer_ranks() -> None:
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=4, strategy="even")).schedule(
        merge_graph(2, 2)
    )
    assert len(placement.owner("merge", "check").ranks) == 2
    with pytest.raises(RoutingError, match=r"3 samples per step cannot be split over the consumer's 2 ranks"):
        plan_routes(placement, 0, 3)
