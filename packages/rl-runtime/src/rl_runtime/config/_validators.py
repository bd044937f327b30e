"""attrs validators for config fields; each raises `ConfigError` naming the field, the expected value and the fix.

Validators check types as well as ranges, so a config built in Python code is held to the same rules as
one read from YAML (where the converter has already checked types).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import attrs

from rl_core import nearest_name
from rl_runtime.config._errors import ConfigError, ConfigProblem, config_error, describe_value
from rl_runtime.config._translate import describe_type

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]

_SCALARS = (bool, int, float, str, type(None))


def _fail(attribute: attrs.Attribute[Any], expected: str, value: object, fix: str = "") -> NoReturn:
    raise config_error(attribute.name, expected, value, fix)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def int_at_least(minimum: int) -> Validator:
    """An int >= `minimum`."""

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not _is_int(value) or value < minimum:  # type: ignore[operator]
            _fail(attribute, f"an int >= {minimum}", value)

    return check


def number_in(low: float, high: float = math.inf, *, low_open: bool = False, high_open: bool = False) -> Validator:
    """A finite number in the interval from `low` to `high`, each end open or closed."""
    if math.isinf(high):
        interval = f"> {low}" if low_open else f">= {low}"
    else:
        interval = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        ok = _is_number(value)
        if ok:
            above = value > low if low_open else value >= low  # type: ignore[operator]
            below = value < high if high_open else value <= high  # type: ignore[operator]
            ok = above and below
        if not ok:
            _fail(attribute, f"a finite number {interval}", value)

    return check


def optional(validator: Validator) -> Validator:
    """`validator`, or None."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            validator(instance, attribute, value)

    return check


def of_type(*types: type) -> Validator:
    """An instance of one of `types` (a bool is not accepted as an int)."""
    expected = " or ".join(describe_type(tp) for tp in types)

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            _fail(attribute, expected, value)

    return check


def non_empty_str(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A str with at least one character."""
    if not isinstance(value, str) or not value:
        _fail(attribute, "a non-empty str", value)


def _unknown_name(path: str, value: object, names: list[str], kind: str) -> ConfigProblem:
    near = nearest_name(value, names) if isinstance(value, str) else None
    fix = f"did you mean {near!r}?" if near else f"use one of: {', '.join(names)}"
    return ConfigProblem(path, f"a registered {kind} ({', '.join(names)})", describe_value(value), fix)


def registered_name(
    registry: Mapping[str, object] | frozenset[str] | tuple[str, ...], kind: str, *, extra: tuple[str, ...] = ()
) -> Validator:
    """A name in `registry` (read when validating, so plugins registered later count) or one of `extra`."""

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or (value not in registry and value not in extra):
            raise ConfigError([_unknown_name(attribute.name, value, [*extra, *sorted(registry)], kind)])

    return check


def registered_names(registry: Mapping[str, object] | frozenset[str] | tuple[str, ...], kind: str) -> Validator:
    """A tuple of distinct names in `registry`; every unknown one is reported with its index."""

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple):
            _fail(attribute, f"a list of {kind} names", value)
        names = sorted(registry)
        problems = [
            _unknown_name(f"{attribute.name}.{index}", item, names, kind)
            for index, item in enumerate(value)
            if not isinstance(item, str) or item not in registry
        ]
        if problems:
            raise ConfigError(problems)
        if len(set(value)) != len(value):
            _fail(attribute, f"distinct {kind} names", value, "list each name once")

    return check


# Parameters an algorithm function takes that the runtime supplies, never the config.
_RUNTIME_SUPPLIED = frozenset({"aggregation", "normalizer", "generator"})


def _accepted_params(fn: object) -> dict[str, inspect.Parameter] | None:
    """Keyword parameters a config may set on `fn`, or None when any name is accepted (or unknown)."""
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    params = signature.parameters.values()
    if any(param.kind is inspect.Parameter.VAR_KEYWORD for param in params):
        return None
    return {
        param.name: param
        for param in params
        if param.kind is inspect.Parameter.KEYWORD_ONLY and param.name not in _RUNTIME_SUPPLIED
    }


def _param_type_matches(value: object, default: object) -> bool:
    if default is None or default is inspect.Parameter.empty:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return _is_number(value)
    return isinstance(value, type(default))


def params_for(
    registry: Mapping[str, object], name_field: str, kind: str, *, resolve: Callable[[Any], str] | None = None
) -> Validator:
    """A mapping of scalars whose keys are keyword parameters of the `registry` entry named by `name_field`.

    `resolve(instance)`, when given, names the entry instead (a field whose value, such as "auto", stands for one).
    """

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, Mapping):
            _fail(attribute, "a mapping of parameter names to scalars", value)
        given = getattr(instance, name_field)
        name = resolve(instance) if resolve is not None else given
        accepted = _accepted_params(registry[name])
        label = f"{kind} {name!r}" if name == given else f"{kind} {name!r} (what {name_field}={given!r} runs here)"
        problems = []
        for key, item in value.items():
            path = f"{attribute.name}.{key}"
            if not isinstance(item, _SCALARS):
                problems.append(ConfigProblem(path, "a scalar (bool, int, float, str or null)", describe_value(item)))
            elif accepted is None:
                continue
            elif key not in accepted:
                listed = ", ".join(sorted(accepted)) or "none"
                near = nearest_name(str(key), list(accepted))
                fix = f"did you mean {near!r}?" if near else f"{label} takes: {listed}"
                problems.append(ConfigProblem(path, f"a parameter of {label} ({listed})", "an unknown key", fix))
            elif not _param_type_matches(item, accepted[key].default):
                default = accepted[key].default
                expected = f"a value like its default {default!r} ({type(default).__name__})"
                problems.append(ConfigProblem(path, expected, describe_value(item)))
        if problems:
            raise ConfigError(problems)

    return check
