"""OpenAI function schemas built from a Python function's signature, type hints and docstring (via pydantic)."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pydantic

from rl_core.tools import ToolConfigError, check_tool_schema

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into the tool description and per-argument descriptions.

    The description is the text before the first section header; argument descriptions come from a Google-style
    `Args:` section (`name (type): text`, continuation lines indented deeper) or Sphinx `:param name: text` lines.
    """
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(line)
        sphinx = _SPHINX_ARG.match(line)
        if header:
            section, current, entry_indent = header.group(1), None, None
        elif sphinx:
            section, current = "sphinx", str(sphinx.group(1))
            params[current] = str(sphinx.group(2)).strip()
        elif section is None:
            description.append(line)
        elif not line.strip():
            continue
        elif section in ("Args", "Arguments", "Parameters"):
            entry_indent = indent if entry_indent is None else entry_indent
            arg = _GOOGLE_ARG.match(line)
            if arg and indent <= entry_indent:
                current = str(arg.group(1)).lstrip("*")
                params[current] = str(arg.group(2)).strip()
            elif current:
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "sphinx" and current and not line.lstrip().startswith(":"):
            params[current] = f"{params[current]} {line.strip()}"
    return " ".join(" ".join(description).split()), params


@dataclass(frozen=True)
class FunctionSchema:
    """A tool's OpenAI function schema and the pydantic model that validates a call's arguments against it."""

    name: str
    schema: dict[str, Any]
    """`{"type": "function", "function": {"name", "description", "parameters"}}`."""
    arguments: type[pydantic.BaseModel]
    """Validates the arguments JSON (extra keys forbidden); `call_kwargs` turns a validated model into kwargs."""
    is_async: bool

    def call_kwargs(self, arguments: object) -> dict[str, Any]:
        """Validate `arguments` (raises `pydantic.ValidationError`) and return the keyword arguments of the call."""
        model = self.arguments.model_validate(arguments)
        fields = type(model).model_fields
        return {cast("str", fields[key].alias): getattr(model, key) for key in fields}


def _strip_titles(node: object, *, in_properties: bool = False) -> object:
    # pydantic adds a "title" to every schema; drop them (never a *property* that happens to be named "title").
    if isinstance(node, dict):
        items = cast("dict[str, object]", node).items()
        return {
            key: _strip_titles(value, in_properties=key in ("properties", "$defs") and not in_properties)
            for key, value in items
            if in_properties or key != "title"
        }
    if isinstance(node, list):
        return [_strip_titles(value) for value in cast("list[object]", node)]
    return node


def function_schema(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> FunctionSchema:
    """Build the OpenAI function schema of `fn` from its signature, type hints and docstring.

    Every parameter must be annotated and passable by keyword (no `*args`/`**kwargs`); a default makes it
    optional. The docstring's summary becomes the description (unless `description` is given), its `Args:` entries
    the argument descriptions. Raises `ToolConfigError` naming the parameter and the fix.
    """
    tool_name = name or getattr(fn, "__name__", "")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolConfigError(f"tool {tool_name!r}: cannot read its signature or type hints ({exc})") from exc
    doc_description, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    for index, (param_name, param) in enumerate(signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolConfigError(
                f"tool {tool_name!r} parameter {param_name!r}: expected a named parameter, got {param.kind.description}"
                "; a tool takes named arguments only, give it explicit keyword parameters"
            )
        if param_name not in hints:
            raise ToolConfigError(
                f"tool {tool_name!r} parameter {param_name!r}: expected a type hint, found none; annotate it "
                "(e.g. `x: int`) so the model knows what to send"
            )
        default = ... if param.default is param.empty else param.default
        field = pydantic.Field(default, alias=param_name, description=arg_docs.get(param_name))
        fields[f"p{index}"] = (hints[param_name], field)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)
        parameters = cast("dict[str, Any]", _strip_titles(model.model_json_schema()))
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolConfigError(
            f"tool {tool_name!r}: its type hints have no JSON schema ({exc}); use JSON types (int, float, str, bool, "
            "list, dict, Literal, Optional, pydantic models)"
        ) from exc
    parameters.setdefault("properties", {})
    schema: dict[str, Any] = {
        "type": "function",
        "function": {"name": tool_name, "description": description or doc_description, "parameters": parameters},
    }
    check_tool_schema(schema)
    return FunctionSchema(tool_name, schema, model, inspect.iscoroutinefunction(fn))
