"""The exceptions a TaskGraph raises when it is built, loaded or planned from invalid input."""

from __future__ import annotations

from rl_core._errors import RLCoreError


class GraphError(RLCoreError, ValueError):
    """A node, graph, pipeline spec or plan is invalid; the message names the graph and nodes involved."""


class DuplicateNodeError(GraphError):
    """Two nodes of one graph share an id."""


class UnknownDependencyError(GraphError):
    """A node depends on an id that is not a node of its graph; the message names the nearest valid id."""


class CycleError(GraphError):
    """The dependencies form a cycle; `cycle` lists it in execution order, first node repeated at the end."""

    def __init__(self, message: str, cycle: tuple[str, ...]) -> None:
        super().__init__(message)
        self.cycle = cycle


class GraphSpecError(GraphError):
    """A pipeline dict (e.g. loaded from YAML) has an unknown key, a missing key or a value of the wrong kind."""


class DuplicateGraphError(GraphError):
    """Two graphs of one plan share an id."""
