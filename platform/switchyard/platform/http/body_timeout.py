"""A deadline for reading the request body: a client that announces a body and never sends it gets 408.

Without one, a request whose body stops arriving holds its connection, its handler and (behind the
idempotency middleware) nothing else for as long as the client likes. The middleware sits outermost, so the
deadline covers every reader of the body: the idempotency middleware and the route's own decoding. It counts
from the moment the request's headers are in, for the whole body (a trickle of bytes does not extend it);
once the body is complete, later waits on ``receive`` (for the client's disconnect, during a stream) are not
bounded.
"""

from __future__ import annotations

import asyncio

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from switchyard.platform.http.errors import RequestTimeout

__all__ = ["BodyReadTimeout"]


class BodyReadTimeout(ASGIMiddleware):
    """Answer 408 ``request_timeout`` (and close the connection) when the body takes longer than ``timeout_s``."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        body_complete = False

        async def receive_by_deadline() -> ReceiveMessage:
            nonlocal body_complete
            if body_complete:
                return await receive()
            try:  # a timeout context, not wait_for: that would run each receive in a task of its own
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(
                    f"the request body did not arrive within {self.timeout_s:g} s", headers={"connection": "close"}
                ) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_complete = True
            return message

        await next_app(scope, receive_by_deadline, send)
