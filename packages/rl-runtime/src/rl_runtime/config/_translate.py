"""Turn cattrs' nested validation errors into `ConfigProblem`s with dotted paths, in words a user reads."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import attrs
from cattrs.errors import AttributeValidationNote, BaseValidationError, ForbiddenExtraKeysError, IterableValidationNote

from rl_core import RLCoreError, nearest_name
from rl_engines.training import TrainConfigError
from rl_runtime.config._errors import ConfigError, ConfigProblem, describe_value
from rl_runtime.config._moved import moved_key_fix
from rl_runtime.config._types import Scalar

_NONE = type(None)
_LEAF_NAMES: dict[object, str] = {
    bool: "a bool (true or false)",
    int: "an int",
    float: "a float",
    str: "a str",
    Path: "a path (str)",
    Any: "any value",
    _NONE: "null",
    Scalar: "a scalar (bool, int, float, str or null)",
}


class Mismatch(TypeError):
    """A value of the wrong type; the translator adds the field's path and its expected type."""

    def __init__(self, found: object, fix: str = "") -> None:
        super().__init__(found, fix)
        self.found = found
        self.fix = fix


def field_names(cls: type) -> list[str]:
    """The keys a mapping structured into `cls` may have."""
    if attrs.has(cls):
        return [field.name for field in attrs.fields(cls) if field.init]
    return [field.name for field in dataclasses.fields(cls) if field.init]


def field_types(cls: type) -> dict[str, Any]:
    """Each init field of `cls` (an attrs class or a dataclass) with its resolved type."""
    hints = typing.get_type_hints(cls)
    return {name: hints.get(name, Any) for name in field_names(cls)}


def describe_type(tp: object) -> str:
    """`tp` in the words of a YAML user: "a float", "a list of str", "one of 'even', 'param_aware'"."""
    if tp in _LEAF_NAMES:
        return _LEAF_NAMES[tp]
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        words = " or ".join(describe_type(arg) for arg in args if arg is not _NONE)
        return f"{words} or null" if _NONE in args else words
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin in (tuple, list):
        if (len(args) == 2 and args[1] is Ellipsis) or (origin is list and args):
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} values ({', '.join(describe_type(arg) for arg in args)})"
    if origin in (dict, Mapping):
        key, value = args or (Any, Any)
        return f"a mapping of {_plural(key)} to {_plural(value)}"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in tp)
    if isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp)):
        return f"a mapping ({tp.__name__})"
    return getattr(tp, "__name__", repr(tp))


def _plural(tp: object) -> str:
    words = describe_type(tp)
    for article in ("a ", "an "):
        if words.startswith(article):
            return words[len(article) :]
    return words


def _segment(exc: BaseException) -> tuple[str, object] | None:
    """The (path segment, expected type) cattrs noted on `exc`, if it failed inside a field or an item."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return note.name, note.type
        if isinstance(note, IterableValidationNote):
            return str(note.index), note.type
    return None


def _unknown_keys(exc: ForbiddenExtraKeysError) -> list[ConfigProblem]:
    valid = field_names(exc.cl)
    problems = []
    for key in sorted(exc.extra_fields):
        near = nearest_name(key, valid)
        fix = moved_key_fix(exc.cl, key) or (f"did you mean {near!r}?" if near else "remove it")
        expected = f"a field of {exc.cl.__name__} ({', '.join(valid)})"
        problems.append(ConfigProblem(key, expected, "an unknown key", fix))
    return problems


def _is_missing_field(exc: BaseException, name: str) -> bool:
    # cattrs reports a required field absent from the mapping as KeyError(name); an rl-core UnknownNameError
    # is a KeyError too but carries a message, so it is not mistaken for a missing field.
    return isinstance(exc, KeyError) and not isinstance(exc, RLCoreError) and exc.args == (name,)


def problems_from(exc: BaseException, expected: object) -> list[ConfigProblem]:
    """Every problem in `exc` (raised while structuring a value of type `expected`), paths relative to it."""
    if isinstance(exc, ConfigError):
        return list(exc.problems)
    if isinstance(exc, ForbiddenExtraKeysError):
        return _unknown_keys(exc)
    if isinstance(exc, Mismatch):
        return [ConfigProblem("", describe_type(expected), describe_value(exc.found), exc.fix)]
    if isinstance(exc, BaseValidationError):
        problems: list[ConfigProblem] = []
        owner = getattr(exc, "cl", expected)  # the class being built, for errors its constructor raised
        for sub in exc.exceptions:
            segment = _segment(sub)
            if segment is None:  # raised by the class itself (a validator or __post_init__), not by a field
                problems.extend(problems_from(sub, owner))
            elif _is_missing_field(sub, segment[0]):
                fix = "the field has no default; set it"
                problems.append(ConfigProblem(segment[0], describe_type(segment[1]), "nothing", fix))
            else:
                problems.extend(problem.under(segment[0]) for problem in problems_from(sub, segment[1]))
        return problems
    if isinstance(exc, TrainConfigError) and exc.expected:
        # An engine config's own check names its field relative to the class that raised it.
        return [ConfigProblem(exc.field, exc.expected, describe_value(exc.found), exc.fix)]
    if isinstance(exc, (ValueError, TypeError, KeyError, AttributeError)):
        # A component's own validation (a dataclass __post_init__) names the problem in its message.
        what = expected.__name__ if isinstance(expected, type) else describe_type(expected)
        return [ConfigProblem("", f"a valid {what}", f"{type(exc).__name__}: {exc}")]
    return []
