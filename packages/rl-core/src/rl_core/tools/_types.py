"""The value types of the tool seam: what a tool call answers (`ToolResult`), how to build a tool environment
(`ToolingEnvConfig`) and the errors the seam raises.

Standard library only, so any framework can implement or consume the seam.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rl_core._errors import RLCoreError


class ToolError(RLCoreError, RuntimeError):
    """A tool environment could not do what was asked at setup or shutdown (a server that does not start, a closed
    env). A failing *tool call* never raises this: it comes back as `ToolResult(is_error=True)`."""


class ToolConfigError(RLCoreError, ValueError):
    """A tool or tool environment was declared wrongly (a malformed schema, a duplicate tool name, an unknown option);
    raised when the env is built, naming the field and the fix."""


@dataclass(frozen=True)
class ToolResult:
    """What one tool call answers, ready to become a `{"role": "tool"}` message for the model.

    A tool's own failure (unknown tool, arguments that fail the schema, an exception, a timeout) is a result with
    `is_error=True` whose `content` tells the model what went wrong and how to call the tool correctly.
    """

    content: str
    """The text the model reads: the tool's output, or the error message."""
    is_error: bool = False
    """True when the call failed; `content` then says why and what to do instead."""

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):  # pyright: ignore[reportUnnecessaryIsInstance]  # runtime guard
            raise TypeError(
                f"ToolResult.content: expected str, got {type(self.content).__name__}; convert the tool's output "
                "to text (json.dumps for structured values) before building the result"
            )


@dataclass(frozen=True)
class ToolingEnvConfig:
    """How to build a registered tool environment (the argument of a `ToolingEnvFactory`).

    `name` picks the factory in `TOOLING_ENVS` ("local": Python functions from the `TOOLS` registry; "mcp": the
    tools of an MCP server, in rl-recipes). `options` carries env-specific settings (MCP: `command`, `args`, `url`);
    an env refuses an option it does not know.
    """

    name: str = "local"
    """A registered tool environment name (`TOOLING_ENVS`)."""
    tools: tuple[str, ...] = ()
    """Registered tool names (`TOOLS`) a local env exposes; an MCP env exposes its server's tools."""
    timeout_s: float = 10.0
    """Wall-clock limit of one tool call; a call past it comes back as an error result."""
    options: Mapping[str, object] = field(default_factory=lambda: dict[str, object]())
    """Env-specific settings; an env refuses one it does not know."""
