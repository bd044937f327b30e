"""`MCPToolingEnv`: the tools of a Model Context Protocol server (official `mcp` client, extra `rl-recipes[mcp]`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from typing import IO, Any, cast

from rl_core.tools import (
    ToolConfigError,
    ToolError,
    ToolingEnvConfig,
    ToolResult,
    check_tool_schema,
    register_tooling_env,
    unknown_tool_result,
)
from rl_recipes.tools._local import DEFAULT_MAX_OUTPUT_CHARS, truncate

logger = logging.getLogger(__name__)

MCP_EXTRA = "rl-recipes[mcp]"
"""The optional extra that installs the official `mcp` client."""
_CLOSE_TIMEOUT_S = 10.0
_REQUEST_TIMEOUT = -32001  # the mcp client's error code for a request past read_timeout_seconds


def _import_mcp() -> Any:
    try:
        import mcp
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise ToolConfigError(
            f"the 'mcp' tooling env needs the official MCP client: pip install '{MCP_EXTRA}' ({exc})"
        ) from exc
    return mcp, stdio_client


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(block, 'mime_type', 'unknown type')}]"
    resource = getattr(block, "resource", None)
    if resource is not None and hasattr(resource, "text"):
        return str(resource.text)
    return str(block.model_dump_json()) if hasattr(block, "model_dump_json") else str(block)


def _result_text(result: Any) -> str:
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def _leaf(exc: BaseException) -> str:
    """The first real error inside (nested) exception groups, as `repr`: what the user needs to read."""
    while (inner := getattr(exc, "exceptions", None)) and isinstance(inner[0], BaseException):  # no 3.10 groups
        exc = inner[0]
    return str(exc) if isinstance(exc, TimeoutError) and str(exc) else repr(exc)


def _tail(log: IO[str] | None, chars: int = 2000) -> str:
    if log is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        log.flush()
        log.seek(0)
        text = log.read()[-chars:].strip()
        return f"; server stderr ends with:\n{text}" if text else ""
    return ""


class MCPToolingEnv:
    """The tools of one MCP server session, over stdio (a spawned command) or streamable HTTP (a URL).

    Build it with `await MCPToolingEnv.connect(...)` inside the event loop that will use it: a background task
    holds the session (the `mcp` client's task groups must open and close in one task). `list_tools()` maps the
    server's tools to OpenAI function schemas (tools whose names OpenAI refuses are skipped with a warning);
    `aexecute` calls them with a timeout. A server that cannot start or answer is a `ToolError` at connect (with
    its stderr tail); a call to a server that died, a lost connection or a timeout is an error result, never a hang.
    Arguments are validated by the server (its error comes back as the result).
    """

    def __init__(
        self,
        client: Any,
        schemas: list[dict[str, Any]],
        session: _Session,
        *,
        timeout_s: float,
        max_output_chars: int,
        log: IO[str] | None,
    ) -> None:
        self._client, self._schemas, self._session = client, schemas, session
        self._names = [cast("str", schema["function"]["name"]) for schema in schemas]
        self.timeout_s, self.max_output_chars = timeout_s, max_output_chars
        self._log = log
        self._closed = False

    @classmethod
    async def connect(
        cls,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        tools: Sequence[str] = (),
        timeout_s: float = 10.0,
        connect_timeout_s: float = 30.0,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> MCPToolingEnv:
        """Start (stdio: `command args`) or reach (`url`) the server, initialise and list its tools.

        `tools` non-empty exposes only those (each must exist on the server). Raises `ToolConfigError` for bad
        arguments or a missing `mcp` package, `ToolError` when the server does not come up in `connect_timeout_s`.
        """
        if (command is None) == (url is None):
            raise ToolConfigError(
                f"MCPToolingEnv: expected exactly one of command (stdio) or url (streamable HTTP), got "
                f"command={command!r}, url={url!r}; set one"
            )
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ToolConfigError(
                f"MCPToolingEnv: timeouts must be > 0 s, got timeout_s={timeout_s}, connect_timeout_s="
                f"{connect_timeout_s}"
            )
        mcp, stdio_client = _import_mcp()
        log: IO[str] | None = None
        if command is not None:
            log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - env owns it
            params = mcp.StdioServerParameters(command=command, args=list(args), env=dict(env or {}), cwd=cwd)
            transport: Any = stdio_client(params, errlog=log)
            where = f"MCP server {' '.join([command, *args])!r}"
        else:
            transport, where = url, f"MCP server at {url!r}"
        session = _Session(mcp.Client(transport, read_timeout_seconds=connect_timeout_s), where)
        try:
            client, listed = await session.open(connect_timeout_s)
        except Exception as exc:
            message = (
                f"{where} did not come up ({_leaf(exc)}){_tail(log)}; check the command/url and that it speaks MCP"
            )
            if log is not None:
                log.close()
            raise ToolError(message) from exc
        try:
            schemas = _select(_schemas(listed, where), tools, where)
        except ToolConfigError:
            await session.close()
            if log is not None:
                log.close()
            raise
        return cls(client, schemas, session, timeout_s=timeout_s, max_output_chars=max_output_chars, log=log)

    def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as OpenAI function schemas."""
        return self._schemas

    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Call tool `name` on the server; a dead server, lost connection or timeout is an error result."""
        if self._closed:
            raise ToolError("MCPToolingEnv: aexecute after aclose(); connect a new env")
        if name not in self._names:
            return unknown_tool_result(name, self._names)
        if self._session.ended:
            return ToolResult(
                f"Error: tool {name!r} cannot run: the MCP server is down{_tail(self._log, 500)}", is_error=True
            )
        try:
            call = self._client.call_tool(name, dict(arguments), read_timeout_seconds=self.timeout_s)
            result = await asyncio.wait_for(call, self.timeout_s + 1.0)
        except asyncio.TimeoutError:
            return self._timed_out(name)
        except Exception as exc:  # a transport or protocol failure is the model's to read, never the episode's end
            if getattr(exc, "code", None) == _REQUEST_TIMEOUT:
                return self._timed_out(name)
            logger.warning("MCP tool %r failed: %r", name, exc)
            return ToolResult(f"Error: tool {name!r} failed: MCP server error: {exc}.", is_error=True)
        return ToolResult(truncate(_result_text(result), self.max_output_chars), bool(result.is_error))

    def _timed_out(self, name: str) -> ToolResult:
        return ToolResult(f"Error: tool {name!r} timed out after {self.timeout_s:g} s.", is_error=True)

    async def aclose(self) -> None:
        """End the session and stop a stdio server (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._session.close()
        if self._log is not None:
            self._log.close()


class _Session:
    """Holds an `mcp.Client` open in a background task: its task groups must open and close in the same task."""

    def __init__(self, client: Any, where: str) -> None:
        self._client, self._where = client, where
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[tuple[Any, list[Any]]] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        """True once the session is over (closed, or the server died or hung up)."""
        return self._task is None or self._task.done()

    async def open(self, timeout_s: float) -> tuple[Any, list[Any]]:
        """Start the session task; answer (client, listed tools) or raise what stopped it (TimeoutError included)."""
        self._task = asyncio.create_task(self._run(), name="mcp-session")
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), timeout_s)
        except asyncio.TimeoutError:
            await self.close(grace_s=0.0)  # still in the handshake: nothing to end gracefully
            raise TimeoutError(f"no answer within {timeout_s:g} s") from None
        except Exception:
            await self.close(grace_s=0.0)
            raise

    async def _run(self) -> None:
        try:
            async with self._client as client:
                listed: list[Any] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self._ready.set_result((client, listed))
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                if isinstance(exc, Exception):
                    self._ready.set_exception(exc)
                else:
                    self._ready.cancel()
            elif not isinstance(exc, asyncio.CancelledError):
                logger.warning("%s: the session ended: %r", self._where, exc)

    async def close(self, grace_s: float = _CLOSE_TIMEOUT_S) -> None:
        """End the session (a stdio server is stopped); cancel it if it does not end within `grace_s`."""
        self._stop.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        except (asyncio.TimeoutError, Exception):
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _select(schemas: list[dict[str, Any]], tools: Sequence[str], where: str) -> list[dict[str, Any]]:
    if not tools:
        return schemas
    offered = [cast("str", schema["function"]["name"]) for schema in schemas]
    missing = sorted(set(tools) - set(offered))
    if missing:
        raise ToolConfigError(f"tools.tools: {missing} not offered by {where}; it offers {offered}")
    return [schema for schema in schemas if schema["function"]["name"] in tools]


def _schemas(listed: Sequence[Any], where: str) -> list[dict[str, Any]]:
    schemas: list[dict[str, Any]] = []
    for tool in listed:
        parameters = dict(tool.input_schema or {})
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        parameters.pop("title", None)
        schema = {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description or "", "parameters": parameters},
        }
        try:
            check_tool_schema(schema)
        except ToolConfigError as exc:
            logger.warning("%s: skipping tool %r: %s", where, tool.name, exc)
            continue
        schemas.append(schema)
    return schemas


_MCP_OPTIONS = ("command", "args", "env", "cwd", "url", "connect_timeout_s", "max_output_chars")


@register_tooling_env("mcp")
async def mcp_tooling_env(config: ToolingEnvConfig) -> MCPToolingEnv:
    """An `MCPToolingEnv` from `config.options` (`command` + `args`/`env`/`cwd`, or `url`; `connect_timeout_s`)."""
    unknown = sorted(set(config.options) - set(_MCP_OPTIONS))
    if unknown:
        raise ToolConfigError(
            f"tools.options: unknown option(s) {unknown} for the 'mcp' env; valid options: {list(_MCP_OPTIONS)}"
        )
    options: dict[str, Any] = dict(config.options)
    return await MCPToolingEnv.connect(tools=config.tools, timeout_s=config.timeout_s, **options)
