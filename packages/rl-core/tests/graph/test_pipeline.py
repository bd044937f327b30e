"""Pipeline: the fluent builder, checked per node when added and as a graph when built."""

from __future__ import annotations

import pytest

from rl_core.graph import (
    CycleError,
    DuplicateNodeError,
    GraphError,
    Node,
    NodeRole,
    Pipeline,
    TaskGraph,
    UnknownDependencyError,
)


def test_chained_build() -> None:
    graph = (
        Pipeline("tiny", "two steps")
        .add_node("rollout", "generate", role=NodeRole.ROLLOUT)
        .add_node(
            "train",
            "train_actor",
            role=NodeRole.ACTOR,
            dependencies=["rollout"],
            params={"param_count": 5},
        )
        .build()
    )
    assert graph == TaskGraph(
        "tiny",
        [
            Node("rollout", "generate", role=NodeRole.ROLLOUT),
            Node(
                "train",
                "train_actor",
                role=NodeRole.ACTOR,
                dependencies=("rollout",),
                params={"param_count": 5},
            ),
        ],
        "two steps",
    )


def test_dependencies_may_name_later_nodes() -> None:
    pipeline = Pipeline("p").add_node("b", "op_b", dependencies=["a"])
    pipeline.add_node("a", "op_a")
    assert pipeline.node_ids == ("b", "a")
    assert pipeline.build().topological_order == ("a", "b")


def test_builder_stays_usable_and_built_graphs_do_not_change() -> None:
    pipeline = Pipeline("p").add(Node("a", "op"))
    first = pipeline.build()
    pipeline.add(Node("b", "op", dependencies=("a",)))
    assert list(first.nodes) == ["a"]
    assert list(pipeline.build().nodes) == ["a", "b"]
    assert pipeline.pipeline_id == "p"
    assert pipeline.description == ""


def test_duplicate_is_rejected_when_added() -> None:
    pipeline = Pipeline("p").add_node("a", "op")
    with pytest.raises(DuplicateNodeError, match="pipeline 'p' already has a node 'a'; node ids must be unique"):
        pipeline.add_node("a", "other")


def test_node_errors_surface_at_add_time() -> None:
    with pytest.raises(GraphError, match="node 'a': role must be a NodeRole"):
        Pipeline("p").add_node("a", "op", role="actor")  # type: ignore[arg-type]


def test_graph_errors_surface_at_build_time() -> None:
    unknown = Pipeline("p").add_node("a", "op", dependencies=["b"])
    with pytest.raises(UnknownDependencyError, match="graph 'p': node 'a' depends on unknown node 'b'"):
        unknown.build()
    cyclic = unknown.add_node("b", "op", dependencies=["a"])
    with pytest.raises(CycleError, match="graph 'p' has a dependency cycle: a -> b -> a"):
        cyclic.build()
    with pytest.raises(GraphError, match="graph 'empty' has no nodes"):
        Pipeline("empty").build()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Pipeline(""), "pipeline id must be a non-empty str without whitespace, got ''"),
        (lambda: Pipeline("p", 5), "pipeline 'p': description must be a str, got 5"),
        (lambda: Pipeline("p").add("a"), "pipeline 'p': add\\(\\) takes a Node, got str"),
    ],
)
def test_rejections(call: object, match: str) -> None:
    with pytest.raises(GraphError, match=match):
        call()  # type: ignore[operator]
