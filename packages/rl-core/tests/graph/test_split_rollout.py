"""The splitter's rollout rule: the cut split placement uses, by role rather than by shape.

The rollout sub-graph is every node of a `ROLLOUT_ROLES` role that depends only on rollout nodes; the
training sub-graph is the rest; every edge between them is a cross dependency from rollout to training.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.graph import (
    ROLLOUT_ROLES,
    CrossDependency,
    GraphError,
    Node,
    NodeRole,
    SplitRule,
    TaskGraph,
    get_pipeline,
    split_graph,
    split_plan,
)

R = NodeRole


def _ids(graph: TaskGraph) -> list[str]:
    return list(graph.topological_order)


def _graph(*nodes: tuple[str, NodeRole, tuple[str, ...]]) -> TaskGraph:
    return TaskGraph("custom", [Node(node_id, f"op_{node_id}", role, deps) for node_id, role, deps in nodes])


def test_grpo_is_cut_after_the_reward() -> None:
    result = split_graph(get_pipeline("grpo"), SplitRule.ROLLOUT)
    rollout, train = result.subgraphs

    assert (rollout.graph_id, train.graph_id) == ("grpo/rollout", "grpo/train")
    assert _ids(rollout) == ["rollout_actor", "function_reward"]
    assert _ids(train) == ["calculate_advantages", "actor_old_log_prob", "reference_log_prob", "actor_train"]
    assert train["calculate_advantages"].dependencies == ()  # its input crosses from the rollout side
    assert result.cross_dependencies == (
        CrossDependency("grpo/rollout", "function_reward", "grpo/train", "calculate_advantages"),
    )
    assert result.is_split and result.owner("actor_train") == "grpo/train"
    assert pickle.loads(pickle.dumps(result)) == result


@pytest.mark.parametrize(
    ("pipeline", "rollout", "first_training"),
    [
        ("dapo", ["rollout_actor", "function_reward", "dynamic_sampling"], "calculate_advantages"),
        ("remax", ["rollout_actor", "function_reward", "greedy_baseline"], "calculate_advantages"),
        ("ppo", ["rollout_actor", "function_reward"], "compute_value"),  # the critic is on the training side
    ],
)
def test_sampling_and_reward_nodes_stay_on_the_rollout_side(
    pipeline: str, rollout: list[str], first_training: str
) -> None:
    result = split_graph(get_pipeline(pipeline), SplitRule.ROLLOUT)
    assert _ids(result.subgraphs[0]) == rollout
    assert [(dep.upstream_node, dep.downstream_node) for dep in result.cross_dependencies] == [
        (rollout[-1], first_training)
    ]


def test_a_chain_the_shape_rule_keeps_whole_is_cut() -> None:
    graph = get_pipeline("grpo")
    assert not split_graph(graph).is_split
    assert split_graph(graph, SplitRule.ROLLOUT).is_split


def test_a_rollout_role_after_a_training_node_goes_with_the_training() -> None:
    graph = _graph(
        ("gen", R.ROLLOUT, ()),
        ("old", R.ACTOR, ("gen",)),
        ("reward", R.REWARD, ("old",)),
        ("train", R.ACTOR, ("reward",)),
    )
    rollout, train = split_graph(graph, SplitRule.ROLLOUT).subgraphs
    assert _ids(rollout) == ["gen"]
    assert _ids(train) == ["old", "reward", "train"]


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        (
            _graph(("old", R.ACTOR, ()), ("train", R.ACTOR, ("old",))),
            r"^pipeline 'custom' has no rollout part to give slots of its own \(rollout roles: dynamic_sampling, "
            r"reward, rollout, starting the pipeline\)$",
        ),
        (_graph(("gen", R.ROLLOUT, ()), ("reward", R.REWARD, ("gen",))), r"has no training part"),
    ],
)
def test_a_graph_without_both_parts_cannot_be_cut(graph: TaskGraph, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        split_graph(graph, SplitRule.ROLLOUT)


def test_rule_must_be_a_split_rule() -> None:
    with pytest.raises(TypeError, match=r"split_graph's rule is a SplitRule \(e.g. SplitRule.ROLLOUT\), got 'rollout'"):
        split_graph(get_pipeline("grpo"), "rollout")  # type: ignore[arg-type]


def test_split_plan_cuts_every_graph_by_the_rule() -> None:
    results = split_plan([get_pipeline("grpo"), get_pipeline("ppo")], SplitRule.ROLLOUT)
    assert [[sub.graph_id for sub in result.subgraphs] for result in results] == [
        ["grpo/rollout", "grpo/train"],
        ["ppo/rollout", "ppo/train"],
    ]


@st.composite
def role_dags(draw: st.DrawFn) -> TaskGraph:
    size = draw(st.integers(2, 8))
    nodes = []
    for index in range(size):
        deps = draw(st.lists(st.sampled_from(range(index)), unique=True)) if index else []
        role = draw(st.sampled_from(list(NodeRole)))
        nodes.append(Node(f"n{index}", "op", role, [f"n{d}" for d in deps]))
    return TaskGraph("g", draw(st.permutations(nodes)))


@settings(max_examples=80, deadline=None)
@given(role_dags())
def test_the_cut_is_a_partition_with_edges_only_from_rollout_to_training(graph: TaskGraph) -> None:
    try:
        result = split_graph(graph, SplitRule.ROLLOUT)
    except GraphError:
        # No rollout part: no entry node has a rollout role; no training part: every node has one.
        starts_with_rollout = any(graph[n].role in ROLLOUT_ROLES for n in graph.entry_ids)
        assert not starts_with_rollout or all(node.role in ROLLOUT_ROLES for node in graph.nodes.values())
        return
    rollout, train = result.subgraphs
    assert sorted([*rollout.nodes, *train.nodes]) == sorted(graph.nodes)
    assert all(node.role in ROLLOUT_ROLES for node in rollout.nodes.values())
    # A rollout node depends only on rollout nodes; a training node of a rollout role depends on a training node.
    for node in graph.nodes.values():
        if node.id in rollout:
            assert all(dep in rollout for dep in node.dependencies)
        elif node.role in ROLLOUT_ROLES:
            assert any(dep in train for dep in node.dependencies)
    expected = {
        (dep, node.id)
        for node in graph.nodes.values()
        for dep in node.dependencies
        if dep in rollout and node.id in train
    }
    assert {(c.upstream_node, c.downstream_node) for c in result.cross_dependencies} == expected
    assert all(c.upstream_graph == "g/rollout" and c.downstream_graph == "g/train" for c in result.cross_dependencies)
