"""A real stdio MCP server (the `mcp` package's MCPServer, formerly FastMCP) that the MCP tests spawn."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("rl-recipes-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers exactly."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Raise an error with `reason`."""
    raise ValueError(reason)


@server.tool()
def slow(seconds: float) -> str:
    """Sleep for `seconds`, then answer."""
    time.sleep(seconds)
    return "done"


@server.tool()
def die() -> str:
    """Kill the server process mid-call."""
    os._exit(3)


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_HANG") == "1":  # a server that starts but never speaks MCP
        time.sleep(60)
    if len(sys.argv) > 1:  # streamable HTTP on this port
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run()
