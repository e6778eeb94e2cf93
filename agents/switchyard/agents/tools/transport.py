"""Transports that connect only to addresses the SSRF guard has vetted ("pinning").

For each request the transport checks the URL, resolves its host once through the guard, and rewrites the
request to connect to that address while the ``Host`` header keeps the original name and TLS uses it for
SNI and certificate verification. Redirects are followed by the client, one request at a time, so every
hop passes through here again. Environment proxies are never used (a proxy would bypass the check).

Use one client per tool call: the connection pool is keyed by address, not by name.
"""

from __future__ import annotations

from typing import Any

import httpx
import httpx2

from switchyard.agents.tools.ssrf import SSRFGuard

__all__ = ["PinnedTransport", "PinnedTransport2"]


async def _pin(guard: SSRFGuard, request: Any) -> None:
    """Check ``request.url`` and rewrite it in place to the vetted address."""
    url = guard.check_url(str(request.url))
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    address = await guard.resolve(url.host, port)
    if address != url.host:
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": url.host}
        request.url = request.url.copy_with(host=address)


class PinnedTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that connects only to addresses :class:`SSRFGuard` admits.

    ``inner`` receives the rewritten request (default: ``httpx.AsyncHTTPTransport(trust_env=False)``);
    tests pass an ``httpx.MockTransport`` to see which address would have been used.
    """

    def __init__(self, guard: SSRFGuard, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.guard = guard
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await _pin(self.guard, request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class PinnedTransport2(httpx2.AsyncBaseTransport):
    """The same as :class:`PinnedTransport` for ``httpx2`` clients (the MCP client library uses httpx2)."""

    def __init__(self, guard: SSRFGuard, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.guard = guard
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await _pin(self.guard, request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
