"""JSON request bodies: refused with a clear 400 when empty, or nested deeper than anything real.

Deeply nested JSON exhausts the interpreter's stack wherever something recurses over it: msgspec's decoder
(about 1,000 levels), ``jsonschema`` checking an agent's tool ``parameters`` (about 200), the simulator
walking a chat completion's tool schema (about 900). No real request comes close to ``MAX_JSON_DEPTH``
(OpenAI's structured-output schemas stop at 10 levels), so a body past it is refused with 400
``json_too_deep`` before it is decoded.
"""

from __future__ import annotations

import re
from typing import Any

from litestar import Request

from switchyard.platform.http.errors import InvalidRequest

__all__ = ["MAX_JSON_DEPTH", "DepthLimitedRequest", "nested_deeper_than", "require_body"]

MAX_JSON_DEPTH = 64
"""Arrays and objects inside one another, the body itself counting as one: ``{"a": [1]}`` is 2 deep."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENERS = frozenset(b"[{")


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether arrays and objects in ``body`` nest more than ``limit`` levels (brackets in strings are text).

    Counts the brackets a decoder would descend into, so malformed JSON is measured as far as a decoder would
    recurse before noticing. Linear in the body; a body with at most ``limit`` opening brackets needs no walk.
    """
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    depth = 0
    for byte in brackets:
        if byte in _OPENERS:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class DepthLimitedRequest(Request[Any, Any, Any]):
    """The app's request class: its JSON body is measured before it is decoded (every route's ``data``)."""

    async def json(self) -> Any:
        if nested_deeper_than(await self.body(), MAX_JSON_DEPTH):
            raise InvalidRequest(
                f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep", code="json_too_deep"
            )
        return await super().json()


async def require_body(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook: a route whose ``data`` is required answers 400 ``missing_body`` to an empty body
    (the framework would name its own argument, ``data``, instead)."""
    data = request.route_handler.parsed_fn_signature.parameters.get("data")
    if data is None or data.is_optional or data.has_default:
        return
    if not (await request.body()).strip():
        raise InvalidRequest("the request body is empty; this route takes a JSON object", code="missing_body")
