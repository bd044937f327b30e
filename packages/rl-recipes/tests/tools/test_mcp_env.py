"""MCPToolingEnv against a real MCP server spawned by the test (stdio; streamable HTTP): round trip, errors, a
dead server."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_core.testing import acheck_tooling_env
from rl_core.tools import ToolConfigError, ToolError, ToolingEnvConfig, ToolResult, make_tooling_env

pytest.importorskip("mcp", reason="MCPToolingEnv needs the optional extra rl-recipes[mcp]")

from rl_recipes.tools import MCPToolingEnv

SERVER = str(Path(__file__).with_name("mcp_server.py"))
STDIO = {"command": sys.executable, "args": [SERVER]}


def test_round_trip_errors_and_a_server_dying_mid_call() -> None:
    async def run() -> None:
        config = ToolingEnvConfig(name="mcp", timeout_s=2.0, options=STDIO)
        env = await make_tooling_env(config)
        assert isinstance(env, MCPToolingEnv)
        add = env.list_tools()[0]["function"]
        assert add["name"] == "add" and add["description"] == "Add two integers exactly."
        assert add["parameters"]["required"] == ["a", "b"] and add["parameters"]["properties"]["a"]["type"] == "integer"
        names = await acheck_tooling_env(env, [("add", {"a": 2**70, "b": 1}, str(2**70 + 1))], close=False)
        assert names == ["add", "fail", "slow", "die"]
        failed = await env.aexecute("fail", {"reason": "no"})
        bad = await env.aexecute("add", {"a": "x", "b": 1})
        late = await env.aexecute("slow", {"seconds": 30})  # the server runs it in its loop: call it last
        assert failed.is_error and "fail" in failed.content
        assert bad.is_error and "valid integer" in bad.content
        assert late.is_error and "timed out after 2 s" in late.content
        started = time.monotonic()
        died = await env.aexecute("die", {})
        after = await env.aexecute("add", {"a": 1, "b": 1})
        assert time.monotonic() - started < 5
        assert died.is_error and after.is_error
        assert "MCP server" in died.content and "MCP server" in after.content
        await env.aclose()
        await env.aclose()
        with pytest.raises(ToolError, match="after aclose"):
            await env.aexecute("add", {"a": 1, "b": 1})

    asyncio.run(run())


def test_a_server_that_is_down_or_mute_is_a_clear_error_at_connect() -> None:
    async def run() -> None:
        with pytest.raises(ToolError, match=r"MCP server .no-such-mcp-server-xyz. did not come up \(FileNotFoundError"):
            await MCPToolingEnv.connect(command="no-such-mcp-server-xyz", connect_timeout_s=5)
        started = time.monotonic()
        with pytest.raises(ToolError, match=r"did not come up \(no answer within 1.5 s\)"):
            await MCPToolingEnv.connect(command=sys.executable, args=[SERVER], env={"MCP_TEST_HANG": "1"},
                                        connect_timeout_s=1.5)  # fmt: skip
        assert time.monotonic() - started < 10
        with pytest.raises(
            ToolError,
            match=r"(?s)did not come up \(MCPError.*Connection closed.*server stderr ends with:\n.*SyntaxError",
        ):
            await MCPToolingEnv.connect(command=sys.executable, args=["-c", "def("], connect_timeout_s=5)
        with pytest.raises(ToolConfigError, match=r"\['nope'\] not offered by MCP server"):
            await MCPToolingEnv.connect(**STDIO, tools=["add", "nope"])
        with pytest.raises(ToolConfigError, match=r"exactly one of command \(stdio\) or url"):
            await MCPToolingEnv.connect()
        with pytest.raises(ToolConfigError, match=r"unknown option\(s\) \['port'\] for the 'mcp' env"):
            await make_tooling_env(ToolingEnvConfig(name="mcp", options={**STDIO, "port": 1}))

    asyncio.run(run())


def test_streamable_http_round_trip() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, SERVER, str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)

        async def run() -> None:
            env = await MCPToolingEnv.connect(url=f"http://127.0.0.1:{port}/mcp", timeout_s=5)
            assert [schema["function"]["name"] for schema in env.list_tools()] == ["add", "fail", "slow", "die"]
            assert await env.aexecute("add", {"a": 40, "b": 2}) == ToolResult("42")
            await env.aclose()

        asyncio.run(run())
    finally:
        server.kill()
        server.wait()
