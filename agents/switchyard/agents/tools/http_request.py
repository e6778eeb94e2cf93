"""The ``http_request`` built-in: GET/POST to allow-listed hosts through the SSRF guard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from switchyard.agents.errors import SSRFBlockedError, ToolExecutionError
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult
from switchyard.agents.tools.fetch import FetchLimits, safe_fetch
from switchyard.agents.tools.ssrf import Resolver, SSRFGuard

__all__ = ["MAX_REQUEST_BODY_CHARS", "HttpRequestTool"]

#: The largest request body the model may send (the loop validates arguments against the schema).
MAX_REQUEST_BODY_CHARS = 100_000


class HttpRequestTool:
    """Lets the model call HTTP endpoints on allow-listed hosts.

    Retry guarantee: GET is idempotent (re-executed after a crash); POST is at-most-once (a call whose
    worker died mid-flight is reported to the model as "outcome unknown" and never sent again).
    The response body is returned as text (undecodable bytes replaced), with the status code.
    """

    kind = ToolKind.BUILTIN

    def __init__(
        self,
        *,
        allowed_hosts: Sequence[str],
        allowed_ports: Sequence[int] | None = None,
        methods: Sequence[str] = ("GET",),
        limits: FetchLimits | None = None,
        resolver: Resolver | None = None,
        allow_loopback: bool = False,
        name: str = "http_request",
        requires_approval: bool = False,
        inner_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not allowed_hosts:
            raise ValueError("http_request needs at least one allowed host")
        self.methods = tuple(m.upper() for m in methods)
        if not set(self.methods) <= {"GET", "POST"}:
            raise ValueError("http_request supports GET and POST only")
        self.limits = limits or FetchLimits()
        self.requires_approval = requires_approval
        self._guard = SSRFGuard(
            resolver=resolver, allowed_hosts=allowed_hosts, allowed_ports=allowed_ports, allow_loopback=allow_loopback
        )
        self._inner_transport = inner_transport
        self.definition = ToolDefinition(
            name=name,
            description=(
                "Send an HTTP request and return the status and body. Allowed hosts: " + ", ".join(allowed_hosts)
            ),
            parameters={
                "type": "object",
                "properties": {
                    "method": {"type": "string", "enum": list(self.methods)},
                    "url": {"type": "string", "maxLength": 2048},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": {"type": "string", "maxLength": MAX_REQUEST_BODY_CHARS},
                },
                "required": ["url"],
                "additionalProperties": False,
            },
        )

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        method = str(arguments.get("method") or "GET").upper()
        return RetrySemantics.IDEMPOTENT if method in {"GET", "HEAD"} else RetrySemantics.AT_MOST_ONCE

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        method = str(arguments.get("method") or "GET").upper()
        if method not in self.methods:
            raise ToolExecutionError(f"method {method} not allowed")
        body = arguments.get("body")
        try:
            result = await safe_fetch(
                self._guard,
                method,
                str(arguments["url"]),
                headers=arguments.get("headers") or {},
                content=body.encode() if isinstance(body, str) and method == "POST" else None,
                limits=self.limits,
                inner_transport=self._inner_transport,
            )
        except SSRFBlockedError as exc:
            raise ToolExecutionError(str(exc)) from None
        return ToolResult.from_value(
            {
                "status": result.status_code,
                "url": result.url,
                "content_type": result.headers.get("content-type", ""),
                "body": result.body.decode("utf-8", errors="replace"),
            }
        )
