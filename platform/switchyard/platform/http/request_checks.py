"""What every request passes before its handler's arguments are parsed (the app's ``before_request`` hook)."""

from __future__ import annotations

from typing import Any

from litestar import Request

from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.json_body import require_body

__all__ = ["check_request", "refuse_nul_parameters"]


async def check_request(request: Request[Any, Any, Any]) -> None:
    """Parameters free of U+0000, and a body where the route requires one."""
    refuse_nul_parameters(request)
    await require_body(request)


def refuse_nul_parameters(request: Request[Any, Any, Any]) -> None:
    """A path or query parameter holding U+0000 (``%00``) is 400 naming it: PostgreSQL cannot compare text with
    it (the lookup was a 500 there, while SQLite found nothing)."""
    for name, value in [*request.path_params.items(), *request.query_params.multi_items()]:
        if isinstance(value, str) and "\x00" in value:
            raise InvalidRequest(
                f"{name}: text may not contain the NUL character (U+0000)", param=name, code="invalid_value"
            )
