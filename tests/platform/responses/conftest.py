"""A real MCP server (streamable HTTP) on 127.0.0.1 for the responses' server-side tools."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

LOOKUPS: list[str] = []


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    mcp = MCPServer("switchyard-responses")

    @mcp.tool()
    def lookup(key: str) -> str:
        """Look a key up in the knowledge base."""
        LOOKUPS.append(key)
        return f"the value of {key} is 42"

    app = mcp.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(allowed_hosts=["mcp.test:*"], allowed_origins=[]),
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(timeout=5)
