"""The tool and tool-environment registries: plain dicts filled by decorators, plus the checked builder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from rl_core._registry import lookup, registrar
from rl_core.tools._protocols import ToolingEnv
from rl_core.tools._types import ToolConfigError, ToolingEnvConfig

ToolFn = Callable[..., Any]
"""A tool: a typed Python function (sync or async) whose docstring describes it to the model."""

ToolingEnvFactory = Callable[[ToolingEnvConfig], Awaitable[ToolingEnv]]
"""`await factory(config) -> ToolingEnv`; async because connecting to a tool server is."""

TOOLS: dict[str, ToolFn] = {}
"""Tool functions by name (rl-recipes registers "calculator" and "python")."""

TOOLING_ENVS: dict[str, ToolingEnvFactory] = {}
"""Tool environment factories by name (rl-recipes registers "local" and "mcp")."""

register_tool = registrar(TOOLS, "tool")
register_tooling_env = registrar(TOOLING_ENVS, "tooling env")


def get_tool(name: str) -> ToolFn:
    """Return the tool registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(TOOLS, name, "tool")


async def make_tooling_env(config: ToolingEnvConfig) -> ToolingEnv:
    """Build the tool environment registered under `config.name` (inside the event loop that will use it)."""
    if config.timeout_s <= 0:
        raise ToolConfigError(
            f"tools.timeout_s must be > 0 (seconds per tool call), got {config.timeout_s}; set a positive timeout"
        )
    return await lookup(TOOLING_ENVS, config.name, "tooling env")(config)
