"""The tool seam for agentic RL: `ToolingEnv` (OpenAI function schemas + async calls), `ToolResult`, registries.

Types only, standard library only, so other frameworks can implement the seam: rl-recipes registers the concrete
envs ("local" Python functions, "mcp" servers) and tools ("calculator", the sandboxed "python").
"""

from rl_core.tools._protocols import ToolingEnv
from rl_core.tools._registry import (
    TOOLING_ENVS,
    TOOLS,
    ToolFn,
    ToolingEnvFactory,
    get_tool,
    make_tooling_env,
    register_tool,
    register_tooling_env,
)
from rl_core.tools._schema import check_tool_schema, unknown_tool_result
from rl_core.tools._types import ToolConfigError, ToolError, ToolingEnvConfig, ToolResult

__all__ = [
    "TOOLING_ENVS",
    "TOOLS",
    "ToolConfigError",
    "ToolError",
    "ToolFn",
    "ToolResult",
    "ToolingEnv",
    "ToolingEnvConfig",
    "ToolingEnvFactory",
    "check_tool_schema",
    "get_tool",
    "make_tooling_env",
    "register_tool",
    "register_tooling_env",
    "unknown_tool_result",
]
