"""Node parameters: plain data (what YAML or JSON can hold), frozen so that a Node stays immutable."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from rl_core.graph._errors import GraphError

PARAM_COUNT_KEY = "param_count"
"""Node parameter holding the parameter count of the model the node runs (an int >= 0).

`estimate_weight` sums it over a graph's nodes, so a planner can give larger sub-graphs more workers.
"""

_SCALARS = (type(None), bool, int, float, str)


def freeze_params(params: Mapping[str, object] | None, where: str) -> Mapping[str, object]:
    """Return a deep, read-only copy of `params` (lists become tuples, mappings become mapping proxies).

    `where` names the owner (e.g. "node 'actor_train'") in error messages. Raises `GraphError` for a
    non-str key or a value that is not None, bool, int, float, str, a list/tuple or a str-keyed mapping,
    and for a `param_count` that is not a non-negative int.
    """
    if params is None:
        return MappingProxyType({})
    if not isinstance(params, Mapping):
        raise GraphError(f"{where}: params must be a mapping with str keys, got {type(params).__name__}")
    frozen = _freeze_mapping(params, f"{where}: params")
    _check_param_count(frozen, where)
    return frozen


def thaw(value: object) -> object:
    """Undo `freeze_params`: mapping proxies become dicts and tuples become lists, recursively."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in cast("Mapping[object, object]", value).items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in cast("tuple[object, ...]", value)]
    return value


def _freeze(value: object, path: str) -> object:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return _freeze_mapping(cast("Mapping[object, object]", value), path)
    if isinstance(value, (list, tuple)):
        items = cast("list[object] | tuple[object, ...]", value)
        return tuple(_freeze(item, f"{path}[{index}]") for index, item in enumerate(items))
    raise GraphError(
        f"{path} is a {type(value).__name__}; parameters hold only None, bool, int, float, str, lists and "
        "str-keyed mappings, so a graph stays plain data (bind objects in the runtime instead)"
    )


def _freeze_mapping(value: Mapping[object, object] | Mapping[str, object], path: str) -> Mapping[str, object]:
    frozen: dict[str, object] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise GraphError(f"{path} has key {key!r} of type {type(key).__name__}; parameter keys must be str")
        frozen[key] = _freeze(item, f"{path}[{key!r}]")
    return MappingProxyType(frozen)


def _check_param_count(params: Mapping[str, object], where: str) -> None:
    if PARAM_COUNT_KEY not in params:
        return
    count = params[PARAM_COUNT_KEY]
    # bool is an int subclass, but True parameters is a typo, not a count.
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise GraphError(
            f"{where}: params[{PARAM_COUNT_KEY!r}] must be a non-negative int (e.g. 7000000000), got {count!r}"
        )
