"""estimate_weight: the sum of declared parameter counts."""

from __future__ import annotations

import pytest

from rl_core.graph import PARAM_COUNT_KEY, Node, TaskGraph, estimate_weight, get_pipeline


def test_sum_of_declared_counts() -> None:
    graph = TaskGraph(
        "g",
        [
            Node("rollout", "generate", params={PARAM_COUNT_KEY: 7_000_000_000}),
            Node("reward", "reward", dependencies=["rollout"]),
            Node("train", "train", dependencies=["reward"], params={PARAM_COUNT_KEY: 500}),
        ],
    )
    assert estimate_weight(graph) == 7_000_000_500
    assert estimate_weight(graph.subgraph(["reward"])) == 0


def test_nothing_declared_weighs_zero() -> None:
    assert estimate_weight(get_pipeline("ppo")) == 0


def test_rejects_non_graph() -> None:
    with pytest.raises(TypeError, match="estimate_weight takes a TaskGraph, got dict"):
        estimate_weight({})  # type: ignore[arg-type]
