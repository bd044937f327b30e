"""The fluent builder that turns a list of node declarations into a validated TaskGraph."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rl_core.graph._errors import DuplicateNodeError, GraphError
from rl_core.graph._node import Node, NodeRole, check_identifier
from rl_core.graph._serialize import parse_graph_dict
from rl_core.graph._task_graph import TaskGraph


class Pipeline:
    """Declare nodes one call at a time, then `build()` the immutable, validated `TaskGraph`.

    >>> graph = (
    ...     Pipeline("tiny")
    ...     .add_node("rollout", "generate", role=NodeRole.ROLLOUT)
    ...     .add_node("train", "train_actor", role=NodeRole.ACTOR, dependencies=["rollout"])
    ...     .build()
    ... )
    >>> graph.topological_order
    ('rollout', 'train')

    Each node is checked when added (a repeated id raises `DuplicateNodeError` at once); dependencies
    may name nodes added later, so unknown dependencies and cycles are reported by `build()`.
    """

    def __init__(self, pipeline_id: str, description: str = "") -> None:
        self._pipeline_id = check_identifier(pipeline_id, "pipeline id")
        if not isinstance(description, str):
            raise GraphError(f"pipeline {pipeline_id!r}: description must be a str, got {description!r}")
        self._description = description
        self._nodes: dict[str, Node] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pipeline:
        """A builder holding the graph described by `data` (the form `TaskGraph.to_dict` writes).

        Raises `GraphSpecError` for an unknown key (naming the nearest valid one), a missing key, a bad
        enum value (listing the valid ones) or a value of the wrong kind.
        """
        graph_id, description, nodes = parse_graph_dict(data)
        pipeline = cls(graph_id, description)
        for node in nodes:
            pipeline.add(node)
        return pipeline

    @property
    def pipeline_id(self) -> str:
        return self._pipeline_id

    @property
    def description(self) -> str:
        return self._description

    @property
    def node_ids(self) -> tuple[str, ...]:
        """Ids of the nodes added so far, in order."""
        return tuple(self._nodes)

    def add_node(
        self,
        node_id: str,
        operation: str,
        *,
        role: NodeRole = NodeRole.DEFAULT,
        dependencies: Iterable[str] = (),
        params: Mapping[str, object] | None = None,
    ) -> Pipeline:
        """Add one node (see `Node` for the fields) and return this builder for chaining."""
        node = Node(
            id=node_id,
            operation=operation,
            role=role,
            dependencies=dependencies,  # pyright: ignore[reportArgumentType]  # Node checks and freezes it
            params=params,  # pyright: ignore[reportArgumentType]  # Node freezes it, None as {}
        )
        return self.add(node)

    def add(self, node: Node) -> Pipeline:
        """Add an already built `Node` and return this builder for chaining."""
        if not isinstance(node, Node):
            raise GraphError(f"pipeline {self._pipeline_id!r}: add() takes a Node, got {type(node).__name__}")
        if node.id in self._nodes:
            raise DuplicateNodeError(
                f"pipeline {self._pipeline_id!r} already has a node {node.id!r}; node ids must be unique"
            )
        self._nodes[node.id] = node
        return self

    def build(self) -> TaskGraph:
        """The validated, immutable graph of the nodes added so far; the builder stays usable."""
        return TaskGraph(self._pipeline_id, self._nodes.values(), self._description)
