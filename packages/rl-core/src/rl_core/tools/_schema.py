"""Checks of OpenAI function-calling schemas and the error messages every tool env shares."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from rl_core.tools._types import ToolConfigError, ToolResult

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_tool_schema(schema: Mapping[str, Any]) -> str:
    """Raise `ToolConfigError` unless `schema` is an OpenAI function schema; return the tool's name.

    Expected: `{"type": "function", "function": {"name": <1-64 of [A-Za-z0-9_-]>, "description": str,
    "parameters": {"type": "object", "properties": {...}, ...}}}`.
    """
    if schema.get("type") != "function" or not isinstance(schema.get("function"), Mapping):
        raise ToolConfigError(
            f'tool schema: expected {{"type": "function", "function": {{...}}}}, got keys {sorted(schema)} with '
            f"type={schema.get('type')!r}; wrap the function description in that envelope"
        )
    function = cast("Mapping[str, Any]", schema["function"])
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolConfigError(
            f"tool schema function.name: expected 1-64 characters of [A-Za-z0-9_-], got {name!r}; rename the tool"
        )
    if not isinstance(function.get("description", ""), str):
        raise ToolConfigError(
            f"tool {name!r} function.description: expected a string, got {type(function['description']).__name__}"
        )
    params = function.get("parameters")
    if not isinstance(params, Mapping) or cast("Mapping[str, Any]", params).get("type") != "object":
        raise ToolConfigError(
            f'tool {name!r} function.parameters: expected a JSON schema {{"type": "object", "properties": ...}}, '
            f"got {params!r}; describe the arguments as one object"
        )
    properties = cast("Mapping[str, Any]", params).get("properties", {})
    if not isinstance(properties, Mapping):
        raise ToolConfigError(
            f"tool {name!r} function.parameters.properties: expected a mapping of argument name to schema, got "
            f"{type(properties).__name__}"
        )
    return name


def unknown_tool_result(name: str, known: Sequence[str]) -> ToolResult:
    """The error result of a call naming a tool the env does not have; it lists the tools the model may call."""
    listed = ", ".join(sorted(known)) if known else "(none)"
    return ToolResult(f"Error: unknown tool {name!r}. Available tools: {listed}. Call one of these by name.", True)
