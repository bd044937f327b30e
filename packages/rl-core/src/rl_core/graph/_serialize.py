"""The dict form of a graph (what a runtime loads from YAML), read strictly and written completely.

    id: grpo                       # required, the graph id
    description: Standard GRPO     # optional
    nodes:                         # required, a list in declaration order
      - id: rollout_actor          # required
        operation: generate        # required, the name a runtime binds
        role: rollout              # optional, a NodeRole value (any case), default "default"
        dependencies: []           # optional, ids of nodes that run first
        params: {param_count: 7000000000}   # optional, plain data

An unknown key is an error naming it and the nearest valid key; a bad enum value names the valid values.
The keys nodes no longer carry (`type`, `forward_only`: nothing read them) are refused with a note to delete them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from rl_core._registry import nearest_name
from rl_core.graph._errors import GraphError, GraphSpecError
from rl_core.graph._node import Node, NodeRole
from rl_core.graph._params import thaw

if TYPE_CHECKING:
    from rl_core.graph._task_graph import TaskGraph

GRAPH_KEYS = ("id", "description", "nodes")
REQUIRED_GRAPH_KEYS = ("id", "nodes")
NODE_KEYS = ("id", "operation", "role", "dependencies", "params")
REQUIRED_NODE_KEYS = ("id", "operation")
REMOVED_NODE_KEYS = ("type", "forward_only")
"""Keys a node once had and no longer carries, because nothing read them."""

E = TypeVar("E", bound=Enum)


def graph_to_dict(graph: TaskGraph) -> dict[str, Any]:
    """Every field of `graph` and its nodes as plain dicts, lists and scalars, nodes in declaration order."""
    return {
        "id": graph.graph_id,
        "description": graph.description,
        "nodes": [node_to_dict(node) for node in graph.nodes.values()],
    }


def node_to_dict(node: Node) -> dict[str, Any]:
    """Every field of `node` as plain data; enums become their lower-case values."""
    return {
        "id": node.id,
        "operation": node.operation,
        "role": node.role.value,
        "dependencies": list(node.dependencies),
        "params": thaw(node.params),
    }


def parse_graph_dict(data: object) -> tuple[str, str, list[Node]]:
    """Read the dict form into (graph id, description, nodes); raises `GraphSpecError` naming the problem."""
    where = "pipeline spec"
    data = _check_keys(data, GRAPH_KEYS, REQUIRED_GRAPH_KEYS, where)
    graph_id = data["id"]
    if not isinstance(graph_id, str) or not graph_id or any(char.isspace() for char in graph_id):
        raise GraphSpecError(f"{where}: 'id' must be a non-empty str without whitespace, got {graph_id!r}")
    where = f"pipeline {graph_id!r}"
    description = data.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise GraphSpecError(f"{where}: 'description' must be a str, got {description!r}")
    items = data["nodes"]
    if not isinstance(items, (list, tuple)):
        raise GraphSpecError(f"{where}: 'nodes' must be a list of node mappings, got {type(items).__name__}")
    nodes = cast("Sequence[object]", items)
    return (
        graph_id,
        description,
        [parse_node_dict(item, f"node #{index} of {where}") for index, item in enumerate(nodes)],
    )


def parse_node_dict(data: object, where: str) -> Node:
    """Read one node's dict form; `where` names it in errors until its id is known."""
    position = where
    node_id = _declared_id(data)
    if isinstance(node_id, str):
        where = f"node {node_id!r} ({position})"
    data = _check_keys(data, NODE_KEYS, REQUIRED_NODE_KEYS, where, removed=REMOVED_NODE_KEYS)
    dependencies = data.get("dependencies", ())
    if dependencies is None:
        dependencies = ()
    if not isinstance(dependencies, (list, tuple)):
        raise GraphSpecError(f"{where}: 'dependencies' must be a list of node ids, got {dependencies!r}")
    dependencies = cast("Sequence[str]", dependencies)  # Node checks each id
    try:
        return Node(
            id=data["id"],
            operation=data["operation"],
            role=parse_enum(NodeRole, data.get("role", NodeRole.DEFAULT.value), f"{where}: 'role'"),
            dependencies=tuple(dependencies),
            params=data.get("params"),  # pyright: ignore[reportArgumentType]  # Node turns None into {}
        )
    except GraphSpecError:
        raise
    except GraphError as exc:
        # The Node's own message names it by id already.
        raise GraphSpecError(f"{position}: {exc}") from exc


def parse_enum(enum: type[E], value: object, where: str) -> E:
    """The member of `enum` whose value is `value` in any case; raises `GraphSpecError` listing the valid values."""
    valid = [member.value for member in enum]
    if isinstance(value, str) and value.lower() in valid:
        return enum(value.lower())
    near = nearest_name(value.lower(), valid) if isinstance(value, str) else None
    hint = f" (did you mean {near!r}?)" if near else ""
    raise GraphSpecError(f"{where} is {value!r}{hint}; valid values: {', '.join(valid)}")


def _declared_id(data: object) -> object:
    """The node's 'id' entry, read before its keys are checked (None when `data` is no mapping)."""
    return cast("Mapping[object, object]", data).get("id") if isinstance(data, Mapping) else None


def _check_keys(
    data: object, keys: tuple[str, ...], required: tuple[str, ...], where: str, removed: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise GraphSpecError(f"{where} must be a mapping with keys {', '.join(keys)}; got {type(data).__name__}")
    data = cast("Mapping[object, object]", data)
    for key in data:
        if key in removed:
            raise GraphSpecError(
                f"{where} has key {key!r}, which nodes no longer carry (nothing read it); delete it. "
                f"Valid keys: {', '.join(keys)}"
            )
        if key not in keys:
            near = nearest_name(str(key), keys)
            hint = f" (did you mean {near!r}?)" if near else ""
            raise GraphSpecError(f"{where} has unknown key {key!r}{hint}; valid keys: {', '.join(keys)}")
    missing = [key for key in required if key not in data]
    if missing:
        raise GraphSpecError(f"{where} is missing required key(s) {', '.join(map(repr, missing))}")
    return cast("Mapping[str, Any]", data)  # every key is one of `keys`
