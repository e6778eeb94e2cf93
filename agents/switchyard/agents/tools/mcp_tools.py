"""MCP tools: a remote MCP server (streamable HTTP) whose tools are offered to the model.

Every connection goes through the SSRF guard (the httpx2 client the ``mcp`` package uses gets a
:class:`~switchyard.agents.tools.transport.PinnedTransport2`), so an MCP URL cannot reach internal
addresses either. A connection is opened per operation (list, call): nothing is held across worker
restarts, which keeps resumption simple.

Retry guarantee: a call is ``idempotent`` (re-executed after a crash) only when the server annotates the
tool ``readOnlyHint`` or ``idempotentHint``; every other MCP tool is ``at_most_once``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from switchyard.agents.errors import SSRFBlockedError, ToolExecutionError
from switchyard.agents.tools.base import (
    RetrySemantics,
    ToolContext,
    ToolDefinition,
    ToolKind,
    ToolResult,
    mcp_tool_name,
)
from switchyard.agents.tools.ssrf import SSRFGuard
from switchyard.agents.tools.transport import PinnedTransport2

__all__ = ["McpServerConnection", "McpTool"]

_MAX_OUTPUT_CHARS = 100_000
#: Characters OpenAI-style function names may not contain (MCP tool names may, e.g. dots).


class McpServerConnection:
    """How to reach one MCP server: URL, headers, timeout and the guard every connection goes through."""

    def __init__(
        self,
        *,
        label: str,
        url: str,
        guard: SSRFGuard,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        allowed_tools: Sequence[str] | None = None,
        requires_approval: bool = False,
    ) -> None:
        guard.check_url(url)
        self.label = label
        self.url = url
        self.guard = guard
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.allowed_tools = None if allowed_tools is None else frozenset(allowed_tools)
        self.requires_approval = requires_approval

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        # The MCP transport does not close a client it was given, so this owns the client's lifetime.
        async with httpx2.AsyncClient(
            transport=PinnedTransport2(self.guard),
            headers=self.headers,
            timeout=httpx2.Timeout(self.timeout_s),
            trust_env=False,
            follow_redirects=False,
        ) as http_client:
            transport = streamable_http_client(self.url, http_client=http_client)
            async with Client(transport, read_timeout_seconds=self.timeout_s, cache=None) as client:
                yield client

    async def list_tools(self) -> list[McpTool]:
        """Connect, list the server's tools (all pages) and wrap the allowed ones."""
        tools: list[McpTool] = []
        try:
            async with self._client() as client:
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    for tool in page.tools:
                        if self.allowed_tools is None or tool.name in self.allowed_tools:
                            annotations = tool.annotations
                            retry_safe = bool(
                                annotations and (annotations.read_only_hint or annotations.idempotent_hint)
                            )
                            tools.append(
                                McpTool(
                                    self,
                                    remote_name=tool.name,
                                    description=tool.description or "",
                                    parameters=dict(tool.input_schema),
                                    retry_safe=retry_safe,
                                )
                            )
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except SSRFBlockedError:
            raise
        except Exception as exc:
            blocked = _find_ssrf(exc)
            if blocked is not None:
                raise blocked from None
            raise ToolExecutionError(f"MCP server {self.label!r} could not be listed: {_describe(exc)}") from None
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Connect and call one tool; the text blocks (or the structured result) become the output."""
        try:
            async with self._client() as client:
                result = await client.call_tool(name, arguments)
        except Exception as exc:
            blocked = _find_ssrf(exc)
            reason = str(blocked) if blocked is not None else _describe(exc)
            raise ToolExecutionError(f"MCP call {self.label}.{name} failed: {reason}") from None
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        if texts:
            output = "\n".join(texts)
        elif result.structured_content is not None:
            output = json.dumps(result.structured_content, sort_keys=True, default=str)
        else:
            output = json.dumps([block.model_dump(mode="json") for block in result.content], default=str)
        return ToolResult(output[:_MAX_OUTPUT_CHARS], is_error=bool(result.is_error))


class McpTool:
    """One tool of an MCP server, named ``<server_label>__<tool name>`` for the model.

    Characters other than letters, digits, ``_`` and ``-`` become ``_`` and the name is cut at 64
    characters; the call goes to the server under the tool's own name.
    """

    kind = ToolKind.MCP

    def __init__(
        self,
        server: McpServerConnection,
        *,
        remote_name: str,
        description: str,
        parameters: dict[str, Any],
        retry_safe: bool,
    ) -> None:
        self.server = server
        self.remote_name = remote_name
        self.requires_approval = server.requires_approval
        self._retry_safe = retry_safe
        if parameters.get("type") != "object":
            parameters = {"type": "object", "properties": {}}
        self.definition = ToolDefinition(
            name=mcp_tool_name(server.label, remote_name), description=description, parameters=parameters
        )

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT if self._retry_safe else RetrySemantics.AT_MOST_ONCE

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return await self.server.call_tool(self.remote_name, arguments)


def _find_ssrf(exc: BaseException) -> SSRFBlockedError | None:
    """The guard's refusal inside an exception group or chain raised by the MCP client, if any."""
    stack: list[BaseException] = [exc]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SSRFBlockedError):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"
