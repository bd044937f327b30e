"""A torch-free `ToolingEnv` test double: one `add` tool, for code that drives tools without a real env."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from rl_core.tools import ToolError, ToolResult, unknown_tool_result

_ADD_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers exactly.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}


class ToyToolingEnv:
    """`add(a: int, b: int)`, answering `str(a + b)`, after an optional `delay_s` (to test concurrency/timeouts).

    Arguments that are not exactly two integers `a` and `b` come back as an error result; `calls` counts the calls
    that ran; a closed env raises `ToolError`.
    """

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.closed = False

    def list_tools(self) -> list[dict[str, Any]]:
        """The one `add` schema."""
        return [_ADD_SCHEMA]

    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run `add`, or answer an error result the model can read."""
        if self.closed:
            raise ToolError("ToyToolingEnv: aexecute after aclose(); build a new env per episode")
        if name != "add":
            return unknown_tool_result(name, ["add"])
        a, b = arguments.get("a"), arguments.get("b")
        if set(arguments) != {"a", "b"} or not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
            return ToolResult(f"Error: add takes two integers a and b, got {dict(arguments)!r}.", is_error=True)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.calls += 1
        return ToolResult(str(int(a) + int(b)))  # pyright: ignore[reportArgumentType]  # checked ints above

    async def aclose(self) -> None:
        """Mark the env closed (idempotent)."""
        self.closed = True
