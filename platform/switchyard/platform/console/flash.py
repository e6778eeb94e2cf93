"""A flash: one short message (“Key revoked.”) that an action leaves for the next page, shown there once.

The action answers a redirect carrying the message in a short-lived cookie; the page it leads to renders the
message and deletes the cookie, so a reload or the next page shows it no more. The text is shown autoescaped,
like any other value, so a forged cookie can at most show its own words.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from litestar import Request, Response
from litestar.response import Redirect

from switchyard.platform.console.edge import CONSOLE_PREFIX
from switchyard.platform.console.render import SECURITY_HEADERS, render

__all__ = ["FLASH_COOKIE", "redirect_with_flash", "render_with_flash"]

FLASH_COOKIE = "switchyard_console_flash"
_FLASH_SECONDS = 60  # long enough for the redirect to be followed, short enough not to surprise later
_MAX_FLASH_CHARS = 300


def redirect_with_flash(path: str, message: str) -> Response[Any]:
    """A 303 to ``path`` (inside the console) that leaves ``message`` for the page there."""
    response: Response[Any] = Redirect(path, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        key=FLASH_COOKIE,
        value=quote(message[:_MAX_FLASH_CHARS]),
        path=CONSOLE_PREFIX,
        max_age=_FLASH_SECONDS,
        httponly=True,
        secure=True,
        samesite="lax",
    )
    return response


def render_with_flash(request: Request[Any, Any, Any], template: str, **context: Any) -> Response[str]:
    """``render``, with the flash left by the previous action (if any) shown and used up."""
    left = request.cookies.get(FLASH_COOKIE)
    response = render(request, template, flash=unquote(left)[:_MAX_FLASH_CHARS] if left else None, **context)
    if left:
        response.delete_cookie(FLASH_COOKIE, path=CONSOLE_PREFIX)
    return response
