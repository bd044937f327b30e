"""The one strict cattrs converter for run configs: attrs classes and frozen dataclasses, no silent coercion.

cattrs' defaults coerce (`int(1.7) == 1`, `bool("false") is True`, a str becomes a tuple of characters); a
config that refuses typos must also refuse those, so every leaf type gets a hook that only accepts what
YAML would write for it. Every failure is turned into one `ConfigError` by `_translate`.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from rl_core import nearest_name
from rl_runtime.config._errors import ConfigError, ConfigProblem
from rl_runtime.config._translate import Mismatch, describe_type, problems_from
from rl_runtime.config._types import Scalar

T = TypeVar("T")

_SCALAR_TYPES = (bool, int, float, str, type(None))
_MAPPING_ORIGINS = (dict, Mapping)
_SEQUENCE_ORIGINS = (tuple, list)


def is_config_class(tp: object) -> bool:
    """True for the classes structured field by field: attrs classes and dataclasses."""
    return isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp))


def _structure_int(value: object, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Mismatch(value)
    return value


def _structure_float(value: object, _: type) -> float:
    # An int is a valid float in YAML (`lr: 1`); a bool is not, although Python calls it an int.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mismatch(value)
    return float(value)


def _structure_bool(value: object, _: type) -> bool:
    if not isinstance(value, bool):
        raise Mismatch(value, fix="write true or false")
    return value


def _structure_str(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise Mismatch(value, fix="quote it to make it a str")
    return value


def _structure_path(value: object, _: type) -> Path:
    if not isinstance(value, (str, Path)) or value == "":
        raise Mismatch(value)
    return Path(value)


def _structure_scalar(value: object, _: object) -> Scalar:
    if not isinstance(value, _SCALAR_TYPES):
        raise Mismatch(value)
    return value  # type: ignore[return-value]


def _structure_any(value: object, _: object) -> object:
    return value


def _structure_enum(value: object, tp: type[enum.Enum]) -> enum.Enum:
    values = [member.value for member in tp]
    if value in values:
        return tp(value)
    near = nearest_name(value, [str(v) for v in values]) if isinstance(value, str) else None
    raise Mismatch(value, fix=f"did you mean {near!r}?" if near else "")


def _scalar_members(tp: object) -> tuple[type, ...]:
    """The members of a union of scalar types (`bool | str`, `int | None`); () for any other type."""
    if get_origin(tp) not in (Union, types.UnionType):
        return ()
    members = get_args(tp)
    return members if all(member in _SCALAR_TYPES for member in members) else ()


def _structure_scalar_union(value: object, tp: object) -> object:
    # The first member the value is exactly (bool is not an int here; an int is a float, as in YAML).
    for member in _scalar_members(tp):
        if member is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if type(value) is member:
            return value
    raise Mismatch(value)


def _is_enum(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_sequence(tp: object) -> bool:
    return tp in _SEQUENCE_ORIGINS or get_origin(tp) in _SEQUENCE_ORIGINS


def _is_mapping(tp: object) -> bool:
    return tp in _MAPPING_ORIGINS or get_origin(tp) in _MAPPING_ORIGINS


def _structure_items(items: list[tuple[str, object, object]]) -> list[Any]:
    """Structure (path, value, type) items, raising one ConfigError with every item's problems."""
    out: list[Any] = []
    problems: list[ConfigProblem] = []
    for path, value, tp in items:
        try:
            out.append(CONVERTER.structure(value, cast("type[Any]", tp)))  # a type form; cattrs types it type[T]
        except Exception as exc:  # a failure cattrs or a validator reports becomes a problem; a bug propagates
            found = problems_from(exc, tp)
            if not found:
                raise
            problems.extend(problem.under(path) for problem in found)
    if problems:
        raise ConfigError(problems)
    return out


def _structure_sequence(value: object, tp: object) -> tuple[Any, ...] | list[Any]:
    # A str is iterable, but `log_sinks: console` means a one-item list only by accident; refuse it.
    if not isinstance(value, (list, tuple)):
        raise Mismatch(value, fix="write a YAML list such as [a, b]")
    args = get_args(tp)
    container = get_origin(tp) or tp
    if not args:
        item_types: list[object] = [Any] * len(value)
    elif (len(args) == 2 and args[1] is Ellipsis) or container is list:
        item_types = [args[0]] * len(value)
    else:
        if len(value) != len(args):
            raise Mismatch(value, fix=f"give exactly {len(args)} values")
        item_types = list(args)
    items = _structure_items([(str(i), item, it) for i, (item, it) in enumerate(zip(value, item_types, strict=True))])
    return tuple(items) if container is tuple else items


def _structure_mapping(value: object, tp: object) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise Mismatch(value)
    key_type, value_type = get_args(tp) or (Any, Any)
    keys = _structure_items([(str(key), key, key_type) for key in value])
    values = _structure_items([(str(key), item, value_type) for key, item in value.items()])
    return dict(zip(keys, values, strict=True))


def _class_hook(cls: type) -> Callable[[object, type], object]:
    fields_fn = make_dict_structure_fn(cls, CONVERTER)

    def structure_class(value: object, tp: type) -> object:
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise Mismatch(value)
        return fields_fn(value, tp)

    return structure_class


def _unstructure_sequence(value: tuple[Any, ...] | list[Any]) -> list[Any]:
    # YAML's safe dumper has no tuple; a list reads back into the tuple field unchanged.
    return [CONVERTER.unstructure(item) for item in value]


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for tp, hook in ((int, _structure_int), (float, _structure_float), (bool, _structure_bool)):
        converter.register_structure_hook(tp, hook)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(Path, _structure_path)
    converter.register_structure_hook_func(lambda tp: tp == Scalar, _structure_scalar)
    # `object` as a value type (a component's `Mapping[str, object]` options) takes any value, as Any does.
    converter.register_structure_hook_func(lambda tp: tp is Any or tp is object, _structure_any)
    converter.register_structure_hook_func(lambda tp: bool(_scalar_members(tp)), _structure_scalar_union)
    converter.register_structure_hook_func(_is_enum, _structure_enum)
    converter.register_structure_hook_func(_is_sequence, _structure_sequence)
    converter.register_structure_hook_func(_is_mapping, _structure_mapping)
    converter.register_structure_hook_factory(is_config_class, _class_hook)
    converter.register_unstructure_hook(Path, str)
    converter.register_unstructure_hook_func(_is_enum, lambda member: member.value)
    converter.register_unstructure_hook_func(_is_sequence, _unstructure_sequence)
    return converter


CONVERTER = _make_converter()
"""The module-level converter every config is structured and unstructured with."""


def structure(data: object, cls: type[T], source: str = "") -> T:
    """Build `cls` (an attrs class or a dataclass) from plain data; raise `ConfigError` listing every problem."""
    try:
        return CONVERTER.structure(data, cls)
    except Exception as exc:  # every structuring failure becomes one ConfigError with dotted paths
        problems = problems_from(exc, cls)
        if not problems:
            raise
        raise ConfigError(problems, source) from None


def unstructure(config: object) -> Any:
    """`config` as plain data (dicts, lists, str, numbers, bools, None) that `structure` reads back."""
    return CONVERTER.unstructure(config)


__all__ = ["CONVERTER", "describe_type", "is_config_class", "structure", "unstructure"]
