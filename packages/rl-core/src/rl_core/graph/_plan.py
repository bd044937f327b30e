"""Plans of several TaskGraphs (one per agent in multi-agent training), checked for distinct ids."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rl_core.graph._errors import DuplicateGraphError, GraphError
from rl_core.graph._split import SplitResult, SplitRule, split_graph
from rl_core.graph._task_graph import TaskGraph


def validate_plan(graphs: TaskGraph | Iterable[TaskGraph]) -> tuple[TaskGraph, ...]:
    """Return a plan input as a tuple of graphs: one TaskGraph, or several whose ids are distinct.

    Raises `DuplicateGraphError` naming the shared id and both positions, and `GraphError` for an empty
    plan or an item that is not a TaskGraph.
    """
    if isinstance(graphs, TaskGraph):
        return (graphs,)
    if isinstance(graphs, (str, bytes)) or not isinstance(graphs, Iterable) or _is_mapping(graphs):
        raise GraphError(f"a plan is a TaskGraph or a list of them, got {type(graphs).__name__}")
    plan = tuple(graphs)
    if not plan:
        raise GraphError("a plan needs at least one TaskGraph")
    first_at: dict[str, int] = {}
    for position, graph in enumerate(plan):
        if not isinstance(graph, TaskGraph):
            raise GraphError(
                f"plan item {position} is a {type(graph).__name__}, not a TaskGraph; "
                "build one with Pipeline(...).build() or get_pipeline(name)"
            )
        if graph.graph_id in first_at:
            raise DuplicateGraphError(
                f"plan items {first_at[graph.graph_id]} and {position} share graph id {graph.graph_id!r}; "
                "give each agent's graph its own id"
            )
        first_at[graph.graph_id] = position
    return plan


def split_plan(graphs: TaskGraph | Iterable[TaskGraph], rule: SplitRule = SplitRule.SHAPE) -> tuple[SplitResult, ...]:
    """Validate a plan and split each of its graphs by `rule`; raises `DuplicateGraphError` if sub-graph ids collide."""
    results = tuple(split_graph(graph, rule) for graph in validate_plan(graphs))
    validate_plan([sub for result in results for sub in result.subgraphs])
    return results


def _is_mapping(value: object) -> bool:
    # A bool rather than an isinstance narrowing, which would leave a Mapping of unknown types behind.
    return isinstance(value, Mapping)
