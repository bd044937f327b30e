"""`LocalToolingEnv`: Python functions as tools, with schemas from their signatures and a per-call timeout."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from rl_core.tools import (
    ToolConfigError,
    ToolError,
    ToolingEnvConfig,
    ToolResult,
    get_tool,
    register_tooling_env,
    unknown_tool_result,
)
from rl_recipes.tools._schema import FunctionSchema, function_schema

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TIMEOUT_S = 10.0
"""Wall-clock limit of one call when neither the env nor the tool sets one."""
DEFAULT_MAX_OUTPUT_CHARS = 8192
"""Tool output longer than this is cut (head kept) before the model reads it."""


@dataclass(frozen=True)
class _Tool:
    fn: Callable[..., Any]
    schema: FunctionSchema
    timeout_s: float


def to_text(value: object) -> str:
    """A tool's return value as the text the model reads: strings as they are, None as "", the rest as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a note saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[output truncated: {len(text) - limit} of {len(text)} characters dropped]"


def _argument_errors(error: pydantic.ValidationError) -> str:
    parts: list[str] = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        parts.append(
            f"{where}: {item['msg']} (got {item['input']!r})"
            if item["type"] != "missing"
            else f"{where}: {item['msg']}"
        )
    return "; ".join(parts)


class LocalToolingEnv:
    """Python functions (sync or async) exposed as tools, one instance per episode or per task's tool set.

    `register_tool(fn)` builds the OpenAI function schema from the signature, type hints and docstring
    (`function_schema`); `aexecute` validates the arguments against it (pydantic, extra keys refused, lax JSON
    coercion such as "3" -> 3), then awaits an async tool with `asyncio.wait_for` or runs a sync one in this env's
    thread pool, bounded by the tool's timeout. A tool may return a `ToolResult` to mark its own failure; any other
    value becomes text (`to_text`). Unknown tool, invalid arguments, an exception and a timeout come back
    as `ToolResult(is_error=True)` saying what to fix.

    Not isolated: tools run in this process. A sync tool that times out keeps its thread until it returns (Python
    cannot kill a thread), and an async tool that blocks the event loop cannot be timed out at all; untrusted or
    CPU-heavy code belongs in the sandboxed `python` tool (`PythonSandbox`), which runs in a killed-on-timeout
    subprocess.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_threads: int = 4,
    ) -> None:
        if timeout_s <= 0:
            raise ToolConfigError(f"LocalToolingEnv timeout_s: expected seconds > 0, got {timeout_s}")
        if max_output_chars < 1:
            raise ToolConfigError(f"LocalToolingEnv max_output_chars: expected >= 1, got {max_output_chars}")
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self._tools: dict[str, _Tool] = {}
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="tool")
        self._closed = False

    def register_tool(
        self, fn: F, *, name: str | None = None, description: str | None = None, timeout_s: float | None = None
    ) -> F:
        """Expose `fn` as a tool named `name` (default: its `__name__`) and return `fn` (usable as a decorator).

        Raises `ToolConfigError` for a duplicate name, a non-positive timeout or a signature with no JSON schema.
        """
        schema = function_schema(fn, name=name, description=description)
        if schema.name in self._tools:
            raise ToolConfigError(
                f"tool name {schema.name!r} is already registered in this env; pass name=... to register_tool"
            )
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if timeout <= 0:
            raise ToolConfigError(f"tool {schema.name!r} timeout_s: expected seconds > 0, got {timeout}")
        self._tools[schema.name] = _Tool(fn, schema, timeout)
        return fn

    def list_tools(self) -> list[dict[str, Any]]:
        """One OpenAI function schema per registered tool, in registration order."""
        return [tool.schema.schema for tool in self._tools.values()]

    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run tool `name` on `arguments`; every failure of the call itself comes back as an error result."""
        if self._closed:
            raise ToolError("LocalToolingEnv: aexecute after aclose(); build a new env per episode")
        tool = self._tools.get(name)
        if tool is None:
            return unknown_tool_result(name, list(self._tools))
        try:
            kwargs = tool.schema.call_kwargs(arguments)
        except pydantic.ValidationError as exc:
            parameters = json.dumps(tool.schema.schema["function"]["parameters"])
            return ToolResult(
                f"Error: invalid arguments for tool {name!r}: {_argument_errors(exc)}. Expected arguments matching "
                f"this JSON schema: {parameters}",
                is_error=True,
            )
        try:
            if tool.schema.is_async:
                value = await asyncio.wait_for(tool.fn(**kwargs), tool.timeout_s)
            else:
                call = functools.partial(tool.fn, **kwargs)
                future = asyncio.get_running_loop().run_in_executor(self._pool, call)
                value = await asyncio.wait_for(future, tool.timeout_s)
        except asyncio.TimeoutError:
            logger.warning("tool %r timed out after %.3g s", name, tool.timeout_s)
            return ToolResult(
                f"Error: tool {name!r} timed out after {tool.timeout_s:g} s. Try simpler or smaller arguments.",
                is_error=True,
            )
        except Exception as exc:  # a tool's exception is the model's to read, never the episode's end
            logger.debug("tool %r raised", name, exc_info=True)
            return ToolResult(f"Error: tool {name!r} raised {type(exc).__name__}: {exc}", is_error=True)
        if isinstance(value, ToolResult):  # a tool that reports its own failures (the sandbox) keeps its verdict
            return ToolResult(truncate(value.content, self.max_output_chars), value.is_error)
        return ToolResult(truncate(to_text(value), self.max_output_chars))

    async def aclose(self) -> None:
        """Stop accepting calls and release the thread pool without waiting for running tools (idempotent)."""
        if not self._closed:
            self._closed = True
            self._pool.shutdown(wait=False, cancel_futures=True)


_LOCAL_OPTIONS = ("max_output_chars", "max_threads")


@register_tooling_env("local")
async def local_tooling_env(config: ToolingEnvConfig) -> LocalToolingEnv:
    """A `LocalToolingEnv` with the registered tools `config.tools` (`rl_core.tools.TOOLS`), each by its name."""
    unknown = sorted(set(config.options) - set(_LOCAL_OPTIONS))
    if unknown:
        raise ToolConfigError(
            f"tools.options: unknown option(s) {unknown} for the 'local' env; valid options: {list(_LOCAL_OPTIONS)}"
        )
    if not config.tools:
        raise ToolConfigError("tools.tools: the 'local' env needs at least one registered tool name, got none")
    options: dict[str, Any] = dict(config.options)
    env = LocalToolingEnv(timeout_s=config.timeout_s, **options)
    for tool_name in config.tools:
        env.register_tool(get_tool(tool_name), name=tool_name)
    return env
