"""A real MCP server (streamable HTTP) on 127.0.0.1 for the responses' server-side tools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.mcp import mcp_http_app
from tests.support.served import port_of, served

LOOKUPS: list[str] = []


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("switchyard-responses")

    @mcp.tool()
    def lookup(key: str) -> str:
        """Look a key up in the knowledge base."""
        LOOKUPS.append(key)
        return f"the value of {key} is 42"

    app = mcp_http_app(mcp)
    with served(app) as url:
        yield port_of(url)
