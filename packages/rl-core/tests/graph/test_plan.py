"""Multi-agent plans: several graphs with distinct ids, and splitting each of them."""

from __future__ import annotations

import pytest

from rl_core.graph import (
    DuplicateGraphError,
    GraphError,
    Node,
    TaskGraph,
    get_pipeline,
    split_plan,
    validate_plan,
)


def _graph(graph_id: str, *edges: tuple[str, str]) -> TaskGraph:
    ids = sorted({end for edge in edges for end in edge}) or ["only"]
    deps = {node_id: [a for a, b in edges if b == node_id] for node_id in ids}
    return TaskGraph(graph_id, [Node(node_id, "op", dependencies=deps[node_id]) for node_id in ids])


def test_single_graph_and_lists() -> None:
    grpo, ppo = get_pipeline("grpo"), get_pipeline("ppo")
    assert validate_plan(grpo) == (grpo,)
    assert validate_plan([grpo, ppo]) == (grpo, ppo)
    assert validate_plan(g for g in (ppo, grpo)) == (ppo, grpo)


@pytest.mark.parametrize(
    ("plan", "error", "match"),
    [
        (
            [_graph("agent_0"), _graph("agent_1"), _graph("agent_0")],
            DuplicateGraphError,
            "plan items 0 and 2 share graph id 'agent_0'; give each agent's graph its own id",
        ),
        ([], GraphError, "a plan needs at least one TaskGraph"),
        ([_graph("a"), "b"], GraphError, r"plan item 1 is a str, not a TaskGraph; build one with Pipeline"),
        ("grpo", GraphError, "a plan is a TaskGraph or a list of them, got str"),
        ({"id": "g"}, GraphError, "a plan is a TaskGraph or a list of them, got dict"),
        (3, GraphError, "a plan is a TaskGraph or a list of them, got int"),
    ],
)
def test_rejections(plan: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        validate_plan(plan)  # type: ignore[arg-type]


def test_split_plan_splits_every_graph() -> None:
    fork = _graph("agent_0", ("r", "a"), ("r", "b"))
    results = split_plan([fork, get_pipeline("grpo")])
    assert [[sub.graph_id for sub in result.subgraphs] for result in results] == [
        ["agent_0/0", "agent_0/1", "agent_0/2"],
        ["grpo"],
    ]


def test_split_plan_rejects_colliding_subgraph_ids() -> None:
    fork = _graph("a", ("r", "x"), ("r", "y"))
    with pytest.raises(DuplicateGraphError, match="share graph id 'a/0'"):
        split_plan([fork, _graph("a/0")])
