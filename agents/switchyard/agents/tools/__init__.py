"""Agent tools: the protocol and registry, built-ins, function tools, MCP tools and the SSRF guard.

``McpServerConnection`` and ``McpTool`` load the ``mcp`` package (which imports Starlette and uvicorn) on
first use, so importing the agents library stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard.agents.tools.base import (
    RetrySemantics,
    Tool,
    ToolContext,
    ToolDefinition,
    ToolKind,
    ToolRegistry,
    ToolResult,
    mcp_tool_name,
    validate_arguments,
)
from switchyard.agents.tools.calculator import CalculatorTool, evaluate_expression
from switchyard.agents.tools.clock import Clock, CurrentTimeTool, utc_now
from switchyard.agents.tools.factory import build_tools
from switchyard.agents.tools.fetch import FetchLimits, FetchResult, safe_fetch
from switchyard.agents.tools.file_search import FileSearcher, FileSearchHit, FileSearchTool
from switchyard.agents.tools.function import FunctionTool
from switchyard.agents.tools.http_request import HttpRequestTool
from switchyard.agents.tools.ssrf import Resolver, SSRFGuard, StaticResolver, address_block_reason, system_resolver
from switchyard.agents.tools.transport import PinnedTransport, PinnedTransport2

if TYPE_CHECKING:
    from switchyard.agents.tools.mcp_tools import McpServerConnection, McpTool

__all__ = [
    "CalculatorTool",
    "Clock",
    "CurrentTimeTool",
    "FetchLimits",
    "FetchResult",
    "FileSearchHit",
    "FileSearchTool",
    "FileSearcher",
    "FunctionTool",
    "HttpRequestTool",
    "McpServerConnection",
    "McpTool",
    "PinnedTransport",
    "PinnedTransport2",
    "Resolver",
    "RetrySemantics",
    "SSRFGuard",
    "StaticResolver",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolKind",
    "ToolRegistry",
    "ToolResult",
    "address_block_reason",
    "build_tools",
    "evaluate_expression",
    "mcp_tool_name",
    "safe_fetch",
    "system_resolver",
    "utc_now",
    "validate_arguments",
]


def __getattr__(name: str) -> Any:
    if name in {"McpServerConnection", "McpTool"}:
        from switchyard.agents.tools import mcp_tools

        return getattr(mcp_tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
