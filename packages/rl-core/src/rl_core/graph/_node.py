"""One task of a TaskGraph: the operation it runs, which model role runs it and what it waits for."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from rl_core.graph._errors import CycleError, GraphError
from rl_core.graph._params import freeze_params, thaw


class NodeRole(Enum):
    """The part of the RL algorithm a node plays; a runtime uses it to pick the model or worker group."""

    DEFAULT = "default"
    ACTOR = "actor"
    CRITIC = "critic"
    ROLLOUT = "rollout"
    REFERENCE = "reference"
    REWARD = "reward"
    ADVANTAGE = "advantage"
    DYNAMIC_SAMPLING = "dynamic_sampling"


def check_identifier(value: object, what: str) -> str:
    """Return `value` if it is a non-empty str without whitespace, else raise `GraphError` naming `what`."""
    if not isinstance(value, str) or not value or any(char.isspace() for char in value):
        raise GraphError(f"{what} must be a non-empty str without whitespace, got {value!r}")
    return value


def _no_params() -> Mapping[str, object]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Node:
    """An immutable task: pure data, bound to an executor by `operation` name in the runtime.

    `id` is unique within its graph; `operation` names what a runtime runs for it (e.g. "train_actor");
    `role` says which model or worker group runs it (the planner's process groups, the engines a slot
    builds, split placement's cut); `dependencies` are the ids of the nodes that must finish first;
    `params` is a read-only mapping of plain data for the operation (see `PARAM_COUNT_KEY`, which
    parameter-aware placement reads). `dependencies` may be given as any sequence and is stored as a
    tuple. A node holds no status, outputs or callables; it pickles and deep-copies as plain data.
    Every field is read by the runtime; a node carries nothing else.
    """

    id: str
    operation: str
    role: NodeRole = NodeRole.DEFAULT
    dependencies: tuple[str, ...] = ()
    # A mapping proxy is not hashable; the other fields identify a node well enough for hashing.
    params: Mapping[str, object] = field(default_factory=_no_params, hash=False)

    def __post_init__(self) -> None:
        check_identifier(self.id, "node id")
        where = f"node {self.id!r}"
        if not isinstance(self.role, NodeRole):
            raise GraphError(f"{where}: role must be a NodeRole (e.g. NodeRole.ACTOR), got {self.role!r}")
        if not isinstance(self.operation, str) or not self.operation:
            raise GraphError(f"{where}: operation must be the non-empty name a runtime binds, got {self.operation!r}")
        object.__setattr__(self, "dependencies", _check_dependencies(self.id, self.dependencies))
        object.__setattr__(self, "params", freeze_params(self.params, where))

    def __reduce__(self) -> tuple[type[Node], tuple[object, ...]]:
        # Mapping proxies cannot be pickled; rebuild from plain data (pickle, deepcopy, Ray transport).
        return (
            Node,
            (self.id, self.operation, self.role, self.dependencies, thaw(self.params)),
        )


def _check_dependencies(node_id: str, dependencies: Iterable[str]) -> tuple[str, ...]:
    where = f"node {node_id!r}"
    if isinstance(dependencies, str):
        raise GraphError(f"{where}: dependencies must be a sequence of node ids; write ({dependencies!r},)")
    try:
        deps = tuple(dependencies)
    except TypeError:
        raise GraphError(f"{where}: dependencies must be a sequence of node ids, got {dependencies!r}") from None
    seen: set[str] = set()
    for dep in deps:
        check_identifier(dep, f"{where}: dependency")
        if dep in seen:
            raise GraphError(f"{where} lists dependency {dep!r} twice; list each dependency once")
        seen.add(dep)
    if node_id in seen:
        raise CycleError(f"{where} depends on itself (cycle {node_id} -> {node_id})", (node_id, node_id))
    return deps
