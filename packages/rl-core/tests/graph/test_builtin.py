"""Built-in pipelines: node order, roles and operations as in siiRL's section 4.2; the registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_core import DuplicateNameError, UnknownNameError
from rl_core.graph import (
    BUILTIN_OPERATIONS,
    EMBODIED_OPERATIONS,
    KL_IN_REWARD_PIPELINES,
    PIPELINES,
    NodeRole,
    Pipeline,
    TaskGraph,
    get_pipeline,
    is_irreducible,
    register_kl_in_reward_pipeline,
    register_pipeline,
)
from rl_core.graph._builtin import embodied_srpo_pipeline

R = NodeRole

# (node id, role, operation), in execution order; each node depends on the one before.
_POLICY_TAIL = [
    ("actor_old_log_prob", R.ACTOR, "compute_old_log_prob"),
    ("reference_log_prob", R.REFERENCE, "compute_ref_log_prob"),
    ("actor_train", R.ACTOR, "train_actor"),
]
EXPECTED = {
    "grpo": [
        ("rollout_actor", R.ROLLOUT, "generate"),
        ("function_reward", R.REWARD, "compute_reward"),
        ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
        *_POLICY_TAIL,
    ],
    "ppo": [
        ("rollout_actor", R.ROLLOUT, "generate"),
        ("function_reward", R.REWARD, "compute_reward"),
        ("compute_value", R.CRITIC, "compute_value"),
        ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
        *_POLICY_TAIL,
        ("critic_train", R.CRITIC, "train_critic"),
    ],
    "dapo": [
        ("rollout_actor", R.ROLLOUT, "generate"),
        ("function_reward", R.REWARD, "compute_reward"),
        ("dynamic_sampling", R.DYNAMIC_SAMPLING, "dynamic_sampling"),
        ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
        *_POLICY_TAIL,
    ],
    "remax": [
        ("rollout_actor", R.ROLLOUT, "generate"),
        ("function_reward", R.REWARD, "compute_reward"),
        ("greedy_baseline", R.ROLLOUT, "compute_greedy_baseline"),
        ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
        *_POLICY_TAIL,
    ],
}
EXPECTED["embodied_srpo"] = [
    ("rollout_actor", R.ROLLOUT, "embodied_rollout"),
    ("dynamic_sampling", R.DYNAMIC_SAMPLING, "embodied_sampling"),
    ("compute_reward", R.REWARD, "embodied_reward"),
    ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
    *_POLICY_TAIL,
]


_OLD, _REF, _TRAIN = _POLICY_TAIL
_ADVANTAGE = ("calculate_advantages", R.ADVANTAGE, "compute_advantage")


def _log_probs_first(rows: list[tuple[str, NodeRole, str]]) -> list[tuple[str, NodeRole, str]]:
    """`rows` with the old and reference log-probs moved right before the advantages (verl's order)."""
    before = rows[: rows.index(_ADVANTAGE)]
    after = rows[rows.index(_TRAIN) :]
    return [*before, _OLD, _REF, _ADVANTAGE, *after]


EXPECTED_KL_IN_REWARD = {name: _log_probs_first(rows) for name, rows in EXPECTED.items()}
EXPECTED_KL_IN_REWARD["ppo"] = [
    ("rollout_actor", R.ROLLOUT, "generate"),
    ("function_reward", R.REWARD, "compute_reward"),
    ("compute_value", R.CRITIC, "compute_value"),
    ("actor_old_log_prob", R.ACTOR, "compute_old_log_prob"),
    ("reference_log_prob", R.REFERENCE, "compute_ref_log_prob"),
    ("calculate_advantages", R.ADVANTAGE, "compute_advantage"),
    ("actor_train", R.ACTOR, "train_actor"),
    ("critic_train", R.CRITIC, "train_critic"),
]  # written out once by hand: the helper above builds the others the same way


def _assert_chain(graph: TaskGraph, expected: list[tuple[str, NodeRole, str]]) -> None:
    assert graph.topological_order == tuple(row[0] for row in expected)
    assert list(graph.nodes) == [row[0] for row in expected]
    previous: tuple[str, ...] = ()
    for node_id, role, operation in expected:
        node = graph[node_id]
        assert (node.role, node.operation) == (role, operation)
        assert node.dependencies == previous
        previous = (node_id,)
    assert is_irreducible(graph)


def test_the_runnable_builtins_are_registered() -> None:
    assert set(EXPECTED) <= set(PIPELINES)
    assert get_pipeline("embodied_srpo") == embodied_srpo_pipeline()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_nodes(name: str) -> None:
    graph = get_pipeline(name)
    assert graph.graph_id == name
    _assert_chain(graph, EXPECTED[name])
    assert get_pipeline(name, kl_in_reward=False) == graph


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_builtin_has_a_kl_in_reward_variant_with_the_log_probs_before_the_advantages(name: str) -> None:
    assert set(KL_IN_REWARD_PIPELINES) == set(EXPECTED)
    graph = get_pipeline(name, kl_in_reward=True)
    assert graph.graph_id == name  # the same pipeline to the planner, the split and the run folder
    note = " (kl.mode=in_reward: old and reference log-probs before the advantages)"
    assert graph.description == get_pipeline(name).description + note  # the run's log names the variant
    _assert_chain(graph, EXPECTED_KL_IN_REWARD[name])
    assert graph.nodes.keys() == get_pipeline(name).nodes.keys()  # the same nodes, in another order


def test_a_pipeline_without_a_kl_in_reward_variant_runs_as_registered(scratch_name: str) -> None:
    @register_pipeline(scratch_name)
    def single_step() -> TaskGraph:
        return Pipeline(scratch_name).add_node("rollout", "generate", role=R.ROLLOUT).build()

    assert get_pipeline(scratch_name, kl_in_reward=True) == get_pipeline(scratch_name)


SERIALISED = Path(__file__).with_name("builtin_graphs.json")
"""Every built-in's `to_dict()` as written before the shared chain became `_rewarded_update`/`_policy_update`."""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_serialises_as_recorded(name: str) -> None:
    recorded = json.loads(SERIALISED.read_text())
    assert set(recorded) == set(EXPECTED)
    assert json.dumps(get_pipeline(name).to_dict(), indent=2) == json.dumps(recorded[name], indent=2)


def test_builtin_operations_are_exactly_those_the_registered_builtins_use() -> None:
    used = {row[2] for rows in EXPECTED.values() for row in rows}
    assert used == BUILTIN_OPERATIONS
    assert {"embodied_rollout", "embodied_sampling", "embodied_reward"} == EMBODIED_OPERATIONS
    assert EMBODIED_OPERATIONS <= BUILTIN_OPERATIONS


def test_each_call_builds_an_equal_fresh_graph() -> None:
    assert get_pipeline("grpo") == get_pipeline("grpo")


def test_unknown_pipeline_lists_the_names() -> None:
    with pytest.raises(
        UnknownNameError, match=r"unknown pipeline 'grp' \(did you mean 'grpo'\?\); valid names: .*dapo"
    ):
        get_pipeline("grp")


@pytest.fixture
def scratch_name() -> Iterator[str]:
    name = "test_only_single_step"
    yield name
    PIPELINES.pop(name, None)
    KL_IN_REWARD_PIPELINES.pop(name, None)


def test_a_user_pipeline_registers_its_kl_in_reward_variant(scratch_name: str) -> None:
    def steps(*names: str) -> TaskGraph:
        pipeline = Pipeline(scratch_name)
        for previous, name in zip((None, *names), names, strict=False):
            pipeline.add_node(name, name, dependencies=[previous] if previous else [])
        return pipeline.build()

    register_pipeline(scratch_name)(lambda: steps("generate", "compute_advantage", "compute_ref_log_prob"))
    register_kl_in_reward_pipeline(scratch_name)(lambda: steps("generate", "compute_ref_log_prob", "compute_advantage"))
    assert get_pipeline(scratch_name).topological_order[1] == "compute_advantage"
    assert get_pipeline(scratch_name, kl_in_reward=True).topological_order[1] == "compute_ref_log_prob"
    with pytest.raises(DuplicateNameError, match="kl_in_reward pipeline variant 'grpo' is already registered"):
        register_kl_in_reward_pipeline("grpo")(lambda: steps("generate"))


def test_user_pipeline_is_one_decorated_function(scratch_name: str) -> None:
    @register_pipeline(scratch_name)
    def single_step() -> TaskGraph:
        return Pipeline(scratch_name).add_node("rollout", "generate", role=R.ROLLOUT).build()

    assert get_pipeline(scratch_name).topological_order == ("rollout",)
    with pytest.raises(DuplicateNameError, match=f"pipeline '{scratch_name}' is already registered"):
        register_pipeline(scratch_name)(single_step)
    with pytest.raises(DuplicateNameError, match="pipeline 'grpo' is already registered"):
        register_pipeline("grpo")(single_step)


def test_factory_must_return_a_graph(scratch_name: str) -> None:
    register_pipeline(scratch_name)(lambda: Pipeline("x"))
    with pytest.raises(TypeError, match=f"pipeline '{scratch_name}' returned a Pipeline; a pipeline function returns"):
        get_pipeline(scratch_name)
