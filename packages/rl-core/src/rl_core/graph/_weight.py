"""A graph's weight for parameter-aware placement: the parameter counts its nodes declare."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from typing import cast

from rl_core.graph._params import PARAM_COUNT_KEY
from rl_core.graph._task_graph import TaskGraph


def estimate_weight(graph: TaskGraph) -> int:
    """Sum of `params["param_count"]` over the nodes of `graph` that declare it (0 when none does).

    Each declaring node counts once, so a model used by two nodes (e.g. the actor's forward pass and its
    update) counts twice if both declare it; declare it on the nodes whose work should weigh. Node
    construction already guarantees each declared count is a non-negative int.
    """
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"estimate_weight takes a TaskGraph, got {type(graph).__name__}")
    return sum(cast(int, node.params.get(PARAM_COUNT_KEY, 0)) for node in graph.nodes.values())
