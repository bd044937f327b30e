"""Tool environments registered with `rl_core.tools`: Python functions ("local"), the sandboxed "python" tool,
MCP servers ("mcp", extra `rl-recipes[mcp]`) and the "calculator" tool.

Importing this package registers the "local" and "mcp" envs in `rl_core.tools.TOOLING_ENVS` and the "calculator"
and "python" tools in `rl_core.tools.TOOLS`; build an env with `await rl_core.tools.make_tooling_env(
ToolingEnvConfig(name="local", tools=("calculator",)))` or directly (`LocalToolingEnv().register_tool(fn)`).
"""

from rl_recipes.tools._calculator import MAX_RESULT_BITS, CalculatorError, calculator
from rl_recipes.tools._local import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    LocalToolingEnv,
    local_tooling_env,
    to_text,
    truncate,
)
from rl_recipes.tools._sandbox import PythonSandbox, SandboxConfig, SandboxRun, python
from rl_recipes.tools._schema import FunctionSchema, function_schema, parse_docstring

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT_S",
    "MAX_RESULT_BITS",
    "CalculatorError",
    "FunctionSchema",
    "LocalToolingEnv",
    "PythonSandbox",
    "SandboxConfig",
    "SandboxRun",
    "calculator",
    "function_schema",
    "local_tooling_env",
    "parse_docstring",
    "python",
    "to_text",
    "truncate",
]
