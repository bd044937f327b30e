"""The conformance run every `ToolingEnv` implementation (local functions, MCP servers, test doubles) should pass."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, cast

from rl_core.tools import ToolingEnv, ToolResult, check_tool_schema

ToolCall = tuple[str, Mapping[str, Any], str]
"""`(tool name, arguments, text the successful result must contain)`."""

_UNKNOWN = "no_such_tool_xyz"


async def _call(env: ToolingEnv, name: str, arguments: Mapping[str, Any], what: str) -> ToolResult:
    try:
        result = await env.aexecute(name, arguments)
    except Exception as exc:  # the contract: a tool's own failure never raises
        call = f"aexecute({name!r}, {dict(arguments)!r})"
        raise AssertionError(f"{call} raised {exc!r}; {what} must be a result") from exc
    if not isinstance(result, ToolResult):  # pyright: ignore[reportUnnecessaryIsInstance]  # checking a contract
        raise AssertionError(f"aexecute({name!r}) returned {type(result).__name__}, expected ToolResult")
    return result


async def acheck_tooling_env(env: ToolingEnv, calls: Sequence[ToolCall] = (), *, close: bool = True) -> list[str]:
    """Check `env` against the `ToolingEnv` contract from inside a running event loop; return its tool names.

    Every schema must pass `check_tool_schema` with distinct names, stable across `list_tools()` calls; an unknown
    tool and, for each tool with required arguments, a call without them must come back as error results (the first
    naming the tools the model may call); each of `calls` must succeed with its expected text in the content. With
    `close`, `aclose()` is then called twice (the second must be a no-op). Raises `AssertionError` or
    `ToolConfigError` naming what is wrong.
    """
    schemas = env.list_tools()
    names = [check_tool_schema(schema) for schema in schemas]
    if len(set(names)) != len(names):
        raise AssertionError(f"list_tools() names must be distinct, got {names}")
    if env.list_tools() != schemas:
        raise AssertionError("list_tools() must answer the same schemas on every call")
    unknown = await _call(env, _UNKNOWN, {}, "an unknown tool")
    if not unknown.is_error or (names and not any(name in unknown.content for name in names)):
        raise AssertionError(
            f"an unknown tool must be an error result naming the available tools {names}, got {unknown!r}"
        )
    for schema in schemas:
        function = cast("Mapping[str, Any]", schema["function"])
        required = cast("Sequence[str]", cast("Mapping[str, Any]", function["parameters"]).get("required", ()))
        if required:
            missing = await _call(env, function["name"], {}, "a call missing required arguments")
            if not missing.is_error:
                raise AssertionError(
                    f"tool {function['name']!r} called without its required arguments {list(required)} must be an "
                    f"error result, got {missing!r}"
                )
    for name, arguments, expected in calls:
        result = await _call(env, name, arguments, "a valid call")
        if result.is_error or expected not in result.content:
            raise AssertionError(f"{name}({dict(arguments)!r}) must succeed with {expected!r} in it, got {result!r}")
    if close:
        await env.aclose()
        await env.aclose()
    return names


def check_tooling_env(env: ToolingEnv, calls: Sequence[ToolCall] = (), *, close: bool = True) -> list[str]:
    """`acheck_tooling_env` run to completion in a fresh event loop (for envs not bound to a running loop)."""
    return asyncio.run(acheck_tooling_env(env, calls, close=close))
