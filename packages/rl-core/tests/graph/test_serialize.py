"""The dict form: to_dict / from_dict round trips, and every malformed spec is named precisely."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.graph import (
    PIPELINES,
    CycleError,
    GraphSpecError,
    Node,
    NodeRole,
    Pipeline,
    TaskGraph,
    get_pipeline,
)

_SPEC = {
    "id": "tiny",
    "description": "two steps",
    "nodes": [
        {"id": "rollout", "operation": "generate", "role": "rollout"},
        {
            "id": "train",
            "operation": "train_actor",
            "role": "Actor",
            "dependencies": ["rollout"],
            "params": {"param_count": 7, "optim": {"lr": 1e-6, "betas": [0.9, 0.99]}},
        },
    ],
}


def _spec(**changes: object) -> dict[str, object]:
    return {**_SPEC, **changes}


def _node_spec(**changes: object) -> dict[str, object]:
    return _spec(nodes=[{"id": "a", "operation": "op", **changes}])


def test_from_dict_reads_defaults_and_any_case() -> None:
    graph = Pipeline.from_dict(_SPEC).build()
    rollout, train = graph["rollout"], graph["train"]
    assert rollout == Node("rollout", "generate", role=NodeRole.ROLLOUT)
    assert train.role is NodeRole.ACTOR
    assert train.params["optim"]["betas"] == (0.9, 0.99)  # type: ignore[index]
    assert graph.description == "two steps"
    assert TaskGraph.from_dict(_SPEC) == graph


def test_to_dict_writes_every_field_as_plain_data() -> None:
    data = TaskGraph.from_dict(_SPEC).to_dict()
    assert data == {
        "id": "tiny",
        "description": "two steps",
        "nodes": [
            {
                "id": "rollout",
                "operation": "generate",
                "role": "rollout",
                "dependencies": [],
                "params": {},
            },
            {
                "id": "train",
                "operation": "train_actor",
                "role": "actor",
                "dependencies": ["rollout"],
                "params": {"param_count": 7, "optim": {"lr": 1e-6, "betas": [0.9, 0.99]}},
            },
        ],
    }
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_builtin_round_trip(name: str) -> None:
    graph = get_pipeline(name)
    data = json.loads(json.dumps(graph.to_dict()))
    again = Pipeline.from_dict(data).build()
    assert again == graph
    assert list(again.nodes) == list(graph.nodes)
    assert again.to_dict() == graph.to_dict()


_leaves = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3)
_values = st.recursive(
    _leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
)


@st.composite
def _graphs(draw: st.DrawFn) -> TaskGraph:
    size = draw(st.integers(1, 6))
    nodes = []
    for index in range(size):
        deps = draw(st.lists(st.sampled_from(range(index)), unique=True)) if index else []
        nodes.append(
            Node(
                f"n{index}",
                draw(st.sampled_from(["op", "generate", "x.y"])),
                role=draw(st.sampled_from(list(NodeRole))),
                dependencies=[f"n{d}" for d in deps],
                params=draw(st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, max_size=3)),
            )
        )
    order = draw(st.permutations(nodes))
    return TaskGraph(draw(st.sampled_from(["g", "agent_0"])), order, draw(st.text(max_size=5)))


@settings(max_examples=60, deadline=None)
@given(_graphs())
def test_random_round_trip(graph: TaskGraph) -> None:
    data = json.loads(json.dumps(graph.to_dict()))
    assert TaskGraph.from_dict(data) == graph
    assert Pipeline.from_dict(data).build().to_dict() == graph.to_dict()


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (
            _spec(node=[]),
            r"pipeline spec has unknown key 'node' \(did you mean 'nodes'\?\); valid keys: id, description, nodes",
        ),
        (_spec(zzz=1), r"pipeline spec has unknown key 'zzz'; valid keys"),
        ({"id": "p"}, r"pipeline spec is missing required key\(s\) 'nodes'"),
        ({"description": "x"}, r"pipeline spec is missing required key\(s\) 'id', 'nodes'"),
        (["id", "p"], "pipeline spec must be a mapping with keys id, description, nodes; got list"),
        (_spec(id=3), "pipeline spec: 'id' must be a non-empty str without whitespace, got 3"),
        (_spec(id="my pipe"), "pipeline spec: 'id' must be a non-empty str without whitespace, got 'my pipe'"),
        (_spec(description=5), "pipeline 'tiny': 'description' must be a str, got 5"),
        (_spec(nodes={"a": {}}), "pipeline 'tiny': 'nodes' must be a list of node mappings, got dict"),
        (_spec(nodes=["a"]), "node #0 of pipeline 'tiny' must be a mapping with keys id, operation, role"),
        (
            _node_spec(dependecies=["x"]),
            r"node 'a' \(node #0 of pipeline 'tiny'\) has unknown key 'dependecies' "
            r"\(did you mean 'dependencies'\?\); valid keys: id, operation, role, dependencies, params$",
        ),
        (
            _spec(nodes=[{"id": "a", "role": "actor"}]),
            r"node 'a' \(node #0 of pipeline 'tiny'\) is missing required key\(s\) 'operation'",
        ),
        (
            _node_spec(role="rollot"),
            r"node 'a' \(node #0 of pipeline 'tiny'\): 'role' is 'rollot' \(did you mean 'rollout'\?\); "
            r"valid values: default, actor, critic, rollout, reference, reward, advantage, dynamic_sampling$",
        ),
        (  # keys nodes no longer carry, because nothing read them
            _node_spec(type="model_train"),
            r"node 'a' \(node #0 of pipeline 'tiny'\) has key 'type', which nodes no longer carry \(nothing read it\); "
            r"delete it. Valid keys: id, operation, role, dependencies, params$",
        ),
        (
            _node_spec(role=3),
            r"'role' is 3; valid values: default, actor, critic, rollout, reference, reward, advantage, "
            r"dynamic_sampling$",
        ),
        (_node_spec(dependencies="x"), r"'dependencies' must be a list of node ids, got 'x'"),
        (_node_spec(forward_only=False), r"node 'a' .* has key 'forward_only', which nodes no longer carry"),
        (_node_spec(params={"param_count": -1}), r"params\['param_count'\] must be a non-negative int"),
        (_node_spec(operation=""), "operation must be the non-empty name a runtime binds"),
        (_spec(nodes=[{"id": 5, "operation": "op"}]), r"node #0 of pipeline 'tiny': node id must"),
    ],
)
def test_spec_rejections(spec: object, match: str) -> None:
    with pytest.raises(GraphSpecError, match=match):
        Pipeline.from_dict(spec)  # type: ignore[arg-type]


def test_optional_keys_may_be_null() -> None:
    graph = TaskGraph.from_dict(_spec(description=None, nodes=[{"id": "a", "operation": "o", "dependencies": None}]))
    assert graph.description == ""
    assert graph["a"].dependencies == ()


def test_graph_errors_keep_their_type() -> None:
    spec = _spec(
        nodes=[
            {"id": "a", "operation": "o", "dependencies": ["b"]},
            {"id": "b", "operation": "o", "dependencies": ["a"]},
        ]
    )
    with pytest.raises(CycleError, match="graph 'tiny' has a dependency cycle: a -> b -> a"):
        TaskGraph.from_dict(spec)
