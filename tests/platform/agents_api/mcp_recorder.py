"""A real MCP server (streamable HTTP) on 127.0.0.1 that records the headers of every request it gets: what a
tenant's MCP ``headers`` look like when they arrive."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.mcp import mcp_http_app
from tests.support.served import port_of, served

TOKEN = "Bearer sk-mcp-0123456789-the-tenant-s-secret"
"""The credential the tests give; the secret part must appear in no answer and no database row."""
SECRET_PART = "sk-mcp-0123456789"


@dataclass
class RecordingMcpServer:
    port: int
    authorizations: list[str | None] = field(default_factory=list)

    def url(self, host: str = "mcp.test") -> str:
        return f"http://{host}:{self.port}/mcp"


@contextmanager
def recording_mcp_server() -> Iterator[RecordingMcpServer]:
    """Serve an MCP server with one tool, ``lookup``, recording each request's ``Authorization`` header."""
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("switchyard-secrets")

    @mcp.tool()
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    inner = mcp_http_app(mcp)
    recorded: list[str | None] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            value = headers.get(b"authorization")
            recorded.append(value.decode() if value is not None else None)
        await inner(scope, receive, send)

    with served(app, lifespan="on") as url:
        yield RecordingMcpServer(port_of(url), recorded)
