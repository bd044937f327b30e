"""One task of a TaskGraph: what kind of work it is, which model role runs it and what it waits for."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from rl_core.graph._errors import CycleError, GraphError
from rl_core.graph._params import freeze_params, thaw


class NodeType(Enum):
    """The kind of work a node does."""

    COMPUTE = "compute"
    DATA_LOAD = "data_load"
    ENV_INTERACT = "env_interact"
    MODEL_INFERENCE = "model_inference"
    MODEL_TRAIN = "model_train"
    PUT_TO_BUFFER = "put_to_buffer"
    GET_FROM_BUFFER = "get_from_buffer"
    BARRIER_SYNC = "barrier_sync"
    CUSTOM = "custom"


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

    `id` is unique within its graph; `dependencies` are the ids of the nodes that must finish first;
    `operation` names what a runtime runs for it (e.g. "train_actor"); `forward_only` marks a model node
    that computes without updating weights; `params` is a read-only mapping of plain data (see
    `PARAM_COUNT_KEY`). `dependencies` may be given as any sequence and is stored as a tuple. A node holds
    no status, outputs or callables; it pickles and deep-copies as plain data.
    """

    id: str
    type: NodeType
    operation: str
    role: NodeRole = NodeRole.DEFAULT
    dependencies: tuple[str, ...] = ()
    forward_only: bool = False
    # A mapping proxy is not hashable; the other fields identify a node well enough for hashing.
    params: Mapping[str, object] = field(default_factory=_no_params, hash=False)

    def __post_init__(self) -> None:
        check_identifier(self.id, "node id")
        where = f"node {self.id!r}"
        if not isinstance(self.type, NodeType):
            raise GraphError(f"{where}: type must be a NodeType (e.g. NodeType.COMPUTE), got {self.type!r}")
        if not isinstance(self.role, NodeRole):
            raise GraphError(f"{where}: role must be a NodeRole (e.g. NodeRole.ACTOR), got {self.role!r}")
        if not isinstance(self.operation, str) or not self.operation:
            raise GraphError(f"{where}: operation must be the non-empty name a runtime binds, got {self.operation!r}")
        if not isinstance(self.forward_only, bool):
            raise GraphError(f"{where}: forward_only must be a bool, got {self.forward_only!r}")
        object.__setattr__(self, "dependencies", _check_dependencies(self.id, self.dependencies))
        object.__setattr__(self, "params", freeze_params(self.params, where))

    def __reduce__(self) -> tuple[type[Node], tuple[object, ...]]:
        # Mapping proxies cannot be pickled; rebuild from plain data (pickle, deepcopy, Ray transport).
        return (
            Node,
            (self.id, self.type, self.operation, self.role, self.dependencies, self.forward_only, thaw(self.params)),
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
