"""The fields of a config class as a user reads them in `--help`: dotted path, default and the field's doc."""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import itertools
import textwrap
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any, Union, get_args, get_origin

import attrs

_INDENT = "  "
_DOC_COLUMN = 44


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under its annotation) from the source of `cls` and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not _is_config_class(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        first = tree.body[0] if tree.body else None
        body = first.body if isinstance(first, ast.ClassDef) else []
        for node, following in itertools.pairwise(body):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                docs[node.target.id] = " ".join(str(following.value.value).split())
    return docs


def _is_config_class(tp: object) -> bool:
    """attrs classes (the run config's own sections) and dataclasses (the engines' configs)."""
    return isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp))


def _nested_class(tp: Any) -> type | None:
    if get_origin(tp) in (Union, types.UnionType):
        classes = [arg for arg in get_args(tp) if arg is not type(None)]
        tp = classes[0] if len(classes) == 1 else None
    return tp if _is_config_class(tp) else None


def _defaults(cls: type) -> list[tuple[str, object]]:
    """(name, default) of each init field; the default is attrs.NOTHING when there is none."""
    if attrs.has(cls):
        out: list[tuple[str, object]] = []
        for field in attrs.fields(cls):
            default = field.default
            # attrs' stubs type Factory as a function; at run time it is the class of factory defaults.
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory() if not default.takes_self else "(derived)"
            out.append((field.name, default))
        return out
    out = []
    for field in dataclasses.fields(cls):
        if field.default_factory is not dataclasses.MISSING:
            out.append((field.name, field.default_factory()))
        elif field.init:
            out.append((field.name, attrs.NOTHING if field.default is dataclasses.MISSING else field.default))
    return out


def _default(default: object) -> str:
    if default is attrs.NOTHING:
        return "(required)"
    if _is_config_class(type(default)):
        return "{...}"
    if isinstance(default, enum.Enum):
        return repr(default.value)
    if isinstance(default, tuple):
        return repr([str(item) if hasattr(item, "__fspath__") else item for item in default])
    return "null" if default is None else repr(str(default) if hasattr(default, "__fspath__") else default)


@dataclasses.dataclass(frozen=True)
class ConfigField:
    """One field of a config class as `--help` and the configuration reference show it."""

    path: str
    """Dotted path from the config's root (`actor.optimizer.lr`)."""
    doc: str
    """The field's docstring, whitespace collapsed; empty when it has none."""
    default: str | None
    """The default as `--help` prints it (`(required)`, `null`, `'sdpa'`, ...); None for a nested section."""
    depth: int
    """How many sections enclose it (0 for a top-level field)."""

    @property
    def is_section(self) -> bool:
        """A nested config section (its fields follow it), not a leaf."""
        return self.default is None


def iter_fields(cls: type, prefix: str = "", depth: int = 0) -> Iterator[ConfigField]:
    """Every field of `cls` in declaration order, each nested section followed by its own fields."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for name, default in _defaults(cls):
        path = f"{prefix}{name}"
        nested = _nested_class(hints.get(name))
        doc = docs.get(name, "")
        if nested is not None:
            yield ConfigField(path, doc, None, depth)
            yield from iter_fields(nested, f"{path}.", depth + 1)
            continue
        yield ConfigField(path, doc, _default(default), depth)


def describe_fields(cls: type, prefix: str = "") -> Iterator[str]:
    """One line per leaf field of `cls` (recursing into nested config sections): `path = default  doc`."""
    for field in iter_fields(cls, prefix):
        indent = _INDENT * field.depth
        if field.is_section:
            yield f"{indent}{field.path}:  {field.doc}" if field.doc else f"{indent}{field.path}:"
            continue
        head = f"{field.path} = {field.default}"
        yield f"{indent}{head:<{_DOC_COLUMN}} {field.doc}".rstrip()
