"""Node: frozen, hashable, validated at construction; every rejection names the node and the fix."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from rl_core.graph import CycleError, GraphError, Node, NodeRole


def _node(**overrides: object) -> Node:
    fields: dict[str, object] = {"id": "actor_train", "operation": "train_actor"}
    fields.update(overrides)
    return Node(**fields)  # type: ignore[arg-type]


def test_defaults() -> None:
    node = _node()
    assert node.role is NodeRole.DEFAULT
    assert node.dependencies == ()
    assert dict(node.params) == {}


def test_dependencies_become_a_tuple() -> None:
    assert _node(dependencies=["a", "b"]).dependencies == ("a", "b")


def test_node_is_frozen() -> None:
    node = _node()
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.id = "other"  # type: ignore[misc]


def test_params_are_a_read_only_deep_copy() -> None:
    source = {"lr": 1e-6, "layers": [1, 2], "nested": {"k": [3]}}
    node = _node(params=source)
    source["lr"] = 0.5
    source["layers"].append(3)  # type: ignore[attr-defined]
    assert node.params["lr"] == 1e-6
    assert node.params["layers"] == (1, 2)
    assert node.params["nested"]["k"] == (3,)  # type: ignore[index]
    with pytest.raises(TypeError):
        node.params["lr"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        node.params["nested"]["k"] = 1  # type: ignore[index]


def test_equal_nodes_hash_equal_and_params_take_part_in_equality() -> None:
    a = _node(params={"x": [1]}, dependencies=["r"])
    b = _node(params={"x": (1,)}, dependencies=("r",))
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != _node(params={"x": [2]}, dependencies=["r"])


def test_replace_keeps_validation() -> None:
    node = _node(dependencies=["a"])
    assert dataclasses.replace(node, dependencies=()).dependencies == ()
    with pytest.raises(CycleError):
        dataclasses.replace(node, dependencies=["actor_train"])


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"id": ""}, "node id must be a non-empty str without whitespace, got ''"),
        ({"id": "actor train"}, "node id must be a non-empty str without whitespace, got 'actor train'"),
        ({"id": 3}, "node id must be a non-empty str without whitespace, got 3"),
        ({"role": "actor"}, r"node 'actor_train': role must be a NodeRole \(e.g. NodeRole.ACTOR\)"),
        ({"operation": ""}, "node 'actor_train': operation must be the non-empty name a runtime binds, got ''"),
        ({"operation": None}, "node 'actor_train': operation must be the non-empty name"),
        ({"dependencies": "rollout"}, r"dependencies must be a sequence of node ids; write \('rollout',\)"),
        ({"dependencies": 5}, "node 'actor_train': dependencies must be a sequence of node ids, got 5"),
        ({"dependencies": [""]}, "node 'actor_train': dependency must be a non-empty str without whitespace"),
        ({"dependencies": [7]}, "node 'actor_train': dependency must be a non-empty str without whitespace, got 7"),
        ({"dependencies": ["a", "a"]}, "node 'actor_train' lists dependency 'a' twice"),
        ({"params": [("a", 1)]}, "node 'actor_train': params must be a mapping with str keys, got list"),
    ],
)
def test_rejections(overrides: dict[str, object], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        _node(**overrides)


def test_self_dependency_is_a_cycle_naming_the_node() -> None:
    with pytest.raises(
        CycleError, match=r"node 'actor_train' depends on itself \(cycle actor_train -> actor_train\)"
    ) as info:
        _node(dependencies=["x", "actor_train"])
    assert info.value.cycle == ("actor_train", "actor_train")


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        _node(id="")


def test_pickles_and_deep_copies_as_plain_data() -> None:
    node = _node(dependencies=["r"], role=NodeRole.ACTOR, params={"a": [1, {"b": 2}]})
    for copied in (pickle.loads(pickle.dumps(node)), copy.deepcopy(node), copy.copy(node)):
        assert copied == node
        assert copied.params["a"] == (1, {"b": 2})
        with pytest.raises(TypeError):
            copied.params["a"] = 0  # type: ignore[index]
