"""``x-request-id`` on every response: the client's (when it is sane) or a new random one."""

from __future__ import annotations

import re
import secrets
from typing import Any

from litestar.datastructures import MutableScopeHeaders

__all__ = ["add_request_id_header", "request_id_of"]

_SANE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def request_id_of(scope: Any) -> str:
    """The request id of a connection, chosen on first use."""
    state = scope.setdefault("state", {})
    request_id = state.get("request_id")
    if request_id is None:
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SANE.match(incoming) else f"req_{secrets.token_hex(12)}"
        state["request_id"] = request_id
    return str(request_id)


async def add_request_id_header(message: Any, scope: Any) -> None:
    """A ``before_send`` hook: runs for every response, including routing errors."""
    if message["type"] == "http.response.start":
        MutableScopeHeaders.from_message(message)["x-request-id"] = request_id_of(scope)
