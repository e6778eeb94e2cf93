"""JSON request bodies: refused with a clear 400 when empty, nested deeper than anything real, or holding NUL.

Deeply nested JSON exhausts the interpreter's stack wherever something recurses over it: msgspec's decoder
(about 1,000 levels), ``jsonschema`` checking an agent's tool ``parameters`` (about 200), the simulator
walking a chat completion's tool schema (about 900). No real request comes close to ``MAX_JSON_DEPTH``
(OpenAI's structured-output schemas stop at 10 levels), so a body past it is refused with 400
``json_too_deep`` before it is decoded.

A string holding U+0000 (``"\\u0000"``) is refused too: PostgreSQL text cannot store it (a 500 there, while
SQLite took it), and no field has a use for it.
"""

from __future__ import annotations

import re
from typing import Any

from litestar import Request
from litestar.enums import RequestEncodingType
from litestar.params import BodyKwarg

from switchyard.platform.http.errors import InvalidRequest

__all__ = ["MAX_JSON_DEPTH", "JsonBodyRequest", "nested_deeper_than", "nul_path", "require_body"]

MAX_JSON_DEPTH = 64
"""Arrays and objects inside one another, the body itself counting as one: ``{"a": [1]}`` is 2 deep."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENERS = frozenset(b"[{")
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")  # an unescaped backslash, then u0000


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


def nul_path(value: Any, path: str = "") -> str | None:
    """The dotted path (``messages.0.content``) of the first string in ``value`` holding U+0000, or of the
    object with such a key (``""``: the body itself)."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        if isinstance(key, str) and "\x00" in key:
            return path
        inner = f"{path}.{key}" if path else str(key)
        if (found := nul_path(child, inner)) is not None:
            return found
    return None


class JsonBodyRequest(Request[Any, Any, Any]):
    """The app's request class: its JSON body (every route's ``data``) is measured before it is decoded, and
    refused when a string in it holds U+0000."""

    async def json(self) -> Any:
        body = await self.body()
        if nested_deeper_than(body, MAX_JSON_DEPTH):
            raise InvalidRequest(
                f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep", code="json_too_deep"
            )
        value = await super().json()
        if _NUL_ESCAPE.search(body) and (path := nul_path(value)) is not None:
            raise InvalidRequest(
                f"{path or 'body'}: text may not contain the NUL character (U+0000)",
                param=path or None,
                code="invalid_value",
            )
        return value


async def require_body(request: Request[Any, Any, Any]) -> None:
    """A route whose ``data`` is required answers 400 ``missing_body`` to an empty body (the framework would
    name its own argument, ``data``, instead).

    A form (an upload) is judged by its ``content-length`` and not read here: its parser then takes the body as it
    arrives, a chunk at a time, instead of tens of megabytes in one go on the event loop."""
    data = request.route_handler.parsed_fn_signature.parameters.get("data")
    if data is None or data.is_optional or data.has_default:
        return
    kwarg = data.kwarg_definition
    if isinstance(kwarg, BodyKwarg) and kwarg.media_type == RequestEncodingType.MULTI_PART:
        if request.headers.get("content-length") == "0":
            raise InvalidRequest(
                "the request body is empty; this route takes a multipart/form-data form", code="missing_body"
            )
        return
    if not (await request.body()).strip():
        raise InvalidRequest("the request body is empty; this route takes a JSON object", code="missing_body")
