"""The tool seam of agentic RL: a `ToolingEnv` lists OpenAI function schemas and executes calls asynchronously."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from rl_core.tools._types import ToolResult


@runtime_checkable
class ToolingEnv(Protocol):
    """A set of tools a model may call during an episode (the AReaL seed's `ToolingEnv`).

    `list_tools()` answers one OpenAI function-calling schema per tool, `{"type": "function", "function": {"name",
    "description", "parameters": <JSON schema of an object>}}` (pass it as `tools=` to a chat template).
    `aexecute(name, arguments)` runs one call; it never raises for the tool's own failure: an unknown tool,
    arguments that fail the schema, an exception inside the tool and a timeout all come back as
    `ToolResult(is_error=True)` with a message the model can act on. `aclose()` releases what the env holds
    (subprocesses, server connections); calling it twice is a no-op.

    Tools belong to an instance, not a class, so two episodes can hold different tool sets; an env is used from the
    event loop that built it.
    """

    def list_tools(self) -> list[dict[str, Any]]: ...

    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult: ...

    async def aclose(self) -> None: ...
