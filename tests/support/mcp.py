"""A real MCP server (streamable HTTP, stateless, JSON answers) for the tests: each test declares its tools on an
``MCPServer`` and serves it here, reachable as ``mcp.test`` (the tests' resolver maps it to 127.0.0.1)."""

from __future__ import annotations

from typing import Any

MCP_HOST = "mcp.test"


def mcp_http_app(server: Any) -> Any:
    """The ASGI app of ``server`` (an ``mcp.server.mcpserver.MCPServer``), accepting requests for ``mcp.test``."""
    from mcp.server.transport_security import TransportSecuritySettings

    return server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(allowed_hosts=[f"{MCP_HOST}:*"], allowed_origins=[]),
    )
