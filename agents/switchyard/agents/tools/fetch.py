"""An outbound HTTP request through the SSRF guard, with caps on redirects, response size and time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
import httpx

from switchyard.agents.errors import SSRFBlockedError, ToolExecutionError
from switchyard.agents.tools.ssrf import SSRFGuard
from switchyard.agents.tools.transport import PinnedTransport

__all__ = ["FetchLimits", "FetchResult", "safe_fetch"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Request headers a caller may not set (they would let the caller steer routing or smuggle identity).
_FORBIDDEN_HEADERS = frozenset(
    {"host", "connection", "proxy-authorization", "transfer-encoding", "content-length", "te", "upgrade"}
)


@dataclass(frozen=True)
class FetchLimits:
    """Caps for one request, redirects included."""

    max_redirects: int = 5
    max_response_bytes: int = 1_000_000
    timeout_s: float = 10.0


@dataclass(frozen=True)
class FetchResult:
    """What came back: the final URL, status, headers and body (at most ``max_response_bytes``)."""

    url: str
    status_code: int
    headers: dict[str, str]
    body: bytes
    redirects: list[str] = field(default_factory=list)


async def safe_fetch(
    guard: SSRFGuard,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    limits: FetchLimits | None = None,
    inner_transport: httpx.AsyncBaseTransport | None = None,
) -> FetchResult:
    """Send one request, following redirects by hand so each hop is checked by ``guard``.

    Raises :class:`SSRFBlockedError` for a refused URL or address (including on a redirect hop) and
    :class:`ToolExecutionError` for too many redirects, an oversized response or a timeout.
    """
    limits = limits or FetchLimits()
    method = method.upper()
    send_headers = {k: v for k, v in (headers or {}).items() if k.lower() not in _FORBIDDEN_HEADERS}
    current = guard.check_url(url)
    redirects: list[str] = []
    transport = PinnedTransport(guard, inner_transport)
    try:
        with anyio.fail_after(limits.timeout_s):
            async with httpx.AsyncClient(
                transport=transport, follow_redirects=False, trust_env=False, timeout=limits.timeout_s
            ) as client:
                while True:
                    request = client.build_request(method, current, headers=send_headers, content=content)
                    response = await client.send(request, stream=True)
                    try:
                        if response.status_code in _REDIRECTS and "location" in response.headers:
                            if len(redirects) >= limits.max_redirects:
                                raise ToolExecutionError(f"more than {limits.max_redirects} redirects")
                            target = current.join(response.headers["location"])
                            checked = guard.check_url(str(target))
                            if checked.host != current.host or checked.scheme != current.scheme:
                                send_headers = {
                                    k: v
                                    for k, v in send_headers.items()
                                    if k.lower() not in {"authorization", "cookie"}
                                }
                            if response.status_code == 303 or (
                                response.status_code in {301, 302} and method not in {"GET", "HEAD"}
                            ):
                                method, content = "GET", None
                            redirects.append(str(checked))
                            current = checked
                            continue
                        body = await _read_capped(response, limits.max_response_bytes)
                        return FetchResult(
                            url=str(current),
                            status_code=response.status_code,
                            headers=dict(response.headers),
                            body=body,
                            redirects=redirects,
                        )
                    finally:
                        await response.aclose()
    except TimeoutError:
        raise ToolExecutionError(f"request took longer than {limits.timeout_s} s") from None
    except httpx.TimeoutException:
        raise ToolExecutionError(f"request took longer than {limits.timeout_s} s") from None
    except (SSRFBlockedError, ToolExecutionError):
        raise
    except httpx.HTTPError as exc:
        raise ToolExecutionError(f"request failed: {type(exc).__name__}: {exc}") from None


async def _read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise ToolExecutionError(f"response larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise ToolExecutionError(f"response larger than {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
