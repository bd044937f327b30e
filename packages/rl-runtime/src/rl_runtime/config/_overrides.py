"""Dotted command-line overrides (`actor.optimizer.lr=1e-6`) applied to a raw config mapping before structuring.

A value is read as a YAML scalar or flow collection (`a.b=[1,2]`, `x=null`, `s="007"`); a mapping value
replaces the whole section. Each path is checked against the config class first, so a typo names the
nearest valid path instead of silently adding a key. `a.0.b` indexes a list (an index one past the end appends).
"""

from __future__ import annotations

import copy
import types
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from rl_core import nearest_name
from rl_runtime.config._converter import is_config_class
from rl_runtime.config._errors import ConfigError, ConfigProblem
from rl_runtime.config._moved import moved_key_fix
from rl_runtime.config._translate import describe_type, field_types
from rl_runtime.config._yaml import parse_yaml

_NONE = type(None)
_MAPPINGS = (dict, Mapping)
_SEQUENCES = (tuple, list)


def _error(override: str, path: str, expected: str, found: str, fix: str = "") -> ConfigError:
    return ConfigError([ConfigProblem(path, expected, found, fix)], f"override {override!r}")


def parse_override(override: str) -> tuple[list[str], Any]:
    """Split `path=value` into its path segments and its YAML-parsed value."""
    key, sep, text = override.partition("=")
    segments = key.strip().split(".")
    if not sep or not all(segment.strip() for segment in segments):
        raise _error(override, key.strip(), "an override of the form dotted.path=value", repr(override))
    value = "" if not text.strip() else parse_yaml(text, f"override {override!r}")
    return [segment.strip() for segment in segments], value


def _unwrap_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        members = [arg for arg in get_args(tp) if arg is not _NONE]
        if len(members) == 1:
            return members[0]
    return tp


def _child_type(tp: Any, segment: str, done: list[str], override: str) -> Any:
    """The type found under `segment` in a value of type `tp`; unknown segments raise with the nearest path."""
    tp = _unwrap_optional(tp)
    prefix = ".".join(done)
    if tp is Any:
        return Any
    if is_config_class(tp):
        fields = field_types(tp)
        if segment in fields:
            return fields[segment]
        near = nearest_name(segment, list(fields))
        fix = f"did you mean {'.'.join([*done, near])!r}?" if near else f"valid keys: {', '.join(fields)}"
        fix = moved_key_fix(tp, segment) or fix
        expected = f"a key of {prefix or 'the config'} ({', '.join(fields)})"
        raise _error(override, ".".join([*done, segment]), expected, f"unknown key {segment!r}", fix)
    origin, args = get_origin(tp) or tp, get_args(tp)
    if origin in _MAPPINGS:
        return args[1] if args else Any
    if origin in _SEQUENCES:
        if not segment.isdigit():
            raise _error(override, ".".join([*done, segment]), f"a list index under {prefix}", repr(segment))
        return args[0] if args else Any
    found = f"{prefix} is {describe_type(tp)}, which has no key {segment!r}"
    raise _error(override, ".".join([*done, segment]), "a path to a setting", found, f"set {prefix}=<value>")


def check_override_path(cls: type, segments: Sequence[str], override: str = "") -> None:
    """Raise `ConfigError` with the nearest valid path unless `segments` names a setting of `cls`."""
    tp: Any = cls
    for index, segment in enumerate(segments):
        tp = _child_type(tp, segment, list(segments[:index]), override or ".".join(segments))


def _container_for(parent: Any, segment: str, override: str, path: str) -> Any:
    """The mapping or list under `segment`, created as an empty mapping when absent or null."""
    if isinstance(parent, list):
        index = int(segment)
        if index >= len(parent):
            raise _error(override, path, f"an index below {len(parent)}", segment)
        if parent[index] is None:
            parent[index] = {}
        return parent[index]
    if parent.get(segment) is None:
        parent[segment] = {}
    return parent[segment]


def _assign(target: Any, segment: str, value: Any, override: str, path: str) -> None:
    if isinstance(target, list):
        index = int(segment)
        if index > len(target):
            raise _error(override, path, f"an index up to {len(target)} (the next one appends)", segment)
        if index == len(target):
            target.append(value)
        else:
            target[index] = value
    else:
        target[segment] = value


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str], cls: type) -> dict[str, Any]:
    """A copy of `raw` with each `path=value` override of `overrides` applied in order, checked against `cls`."""
    result: dict[str, Any] = copy.deepcopy(dict(raw))
    for override in overrides:
        segments, value = parse_override(override)
        check_override_path(cls, segments, override)
        target: Any = result
        for depth, segment in enumerate(segments[:-1]):
            path = ".".join(segments[: depth + 1])
            target = _container_for(target, segment, override, path)
            if not isinstance(target, (dict, list)):
                found = f"{path} holds {target!r}, not a section"
                raise _error(override, path, "a mapping or list to set a key in", found, f"set {path} as a whole")
        _assign(target, segments[-1], value, override, ".".join(segments))
    return result
