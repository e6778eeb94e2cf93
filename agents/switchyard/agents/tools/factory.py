"""Building an agent's :class:`ToolRegistry` from its spec (listing MCP servers is the only I/O)."""

from __future__ import annotations

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.spec import (
    AgentSpec,
    CalculatorToolSpec,
    CurrentTimeToolSpec,
    FileSearchToolSpec,
    FunctionToolSpec,
    HttpRequestToolSpec,
    McpToolSpec,
)
from switchyard.agents.tools.base import ToolRegistry
from switchyard.agents.tools.calculator import CalculatorTool
from switchyard.agents.tools.clock import Clock, CurrentTimeTool, utc_now
from switchyard.agents.tools.fetch import FetchLimits
from switchyard.agents.tools.file_search import FileSearcher, FileSearchTool
from switchyard.agents.tools.function import FunctionTool
from switchyard.agents.tools.http_request import HttpRequestTool
from switchyard.agents.tools.ssrf import Resolver, SSRFGuard

__all__ = ["build_tools"]


async def build_tools(
    spec: AgentSpec,
    *,
    resolver: Resolver | None = None,
    clock: Clock = utc_now,
    allow_loopback: bool = False,
    file_searcher: FileSearcher | None = None,
) -> ToolRegistry:
    """The tools of ``spec``, with every MCP server's tools listed now (one connection per server).

    ``resolver`` and ``allow_loopback`` configure the SSRF guard of ``http_request`` and MCP tools;
    ``allow_loopback`` exists for tests only. MCP headers sealed at rest are opened here, for the connection.
    ``file_searcher`` is the platform's retrieval the ``file_search`` tool asks (without one, the tool is refused).
    Raises ``ToolExecutionError`` when an MCP server cannot be listed or its headers cannot be opened, and
    ``SSRFBlockedError`` when its URL is refused.
    """
    registry = ToolRegistry()
    for tool in spec.tools:
        if isinstance(tool, FunctionToolSpec):
            registry.add(
                FunctionTool(
                    tool.name, tool.parameters, description=tool.description, requires_approval=tool.requires_approval
                )
            )
        elif isinstance(tool, CalculatorToolSpec):
            registry.add(CalculatorTool(name=tool.name, requires_approval=tool.requires_approval))
        elif isinstance(tool, CurrentTimeToolSpec):
            registry.add(CurrentTimeTool(clock=clock, name=tool.name, requires_approval=tool.requires_approval))
        elif isinstance(tool, HttpRequestToolSpec):
            registry.add(
                HttpRequestTool(
                    allowed_hosts=tool.allowed_hosts,
                    allowed_ports=tool.allowed_ports,
                    methods=tool.methods,
                    limits=FetchLimits(
                        max_redirects=tool.max_redirects,
                        max_response_bytes=tool.max_response_bytes,
                        timeout_s=tool.timeout_s,
                    ),
                    resolver=resolver,
                    allow_loopback=allow_loopback,
                    name=tool.name,
                    requires_approval=tool.requires_approval,
                )
            )
        elif isinstance(tool, FileSearchToolSpec):
            if file_searcher is None:
                raise ToolExecutionError("file_search needs the platform's vector stores, which are not available here")
            registry.add(
                FileSearchTool(
                    file_searcher,
                    vector_store_ids=tool.vector_store_ids,
                    max_num_results=tool.max_num_results,
                    filters=tool.filters,
                    score_threshold=tool.score_threshold,
                )
            )
        elif isinstance(tool, McpToolSpec):
            from switchyard.agents.tools.mcp_tools import McpServerConnection  # loads mcp only when used
            from switchyard.agents.tools.secrets import open_headers

            connection = McpServerConnection(
                label=tool.server_label,
                url=tool.server_url,
                guard=SSRFGuard(resolver=resolver, allow_loopback=allow_loopback),
                headers=open_headers(tool),  # sealed at rest: opened for the connection only
                timeout_s=tool.timeout_s,
                allowed_tools=tool.allowed_tools,
                requires_approval=tool.requires_approval,
            )
            for mcp_tool in await connection.list_tools():
                registry.add(mcp_tool)
    return registry
