"""Server-rendered pages: Jinja templates from this package, served with a strict content security policy."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from litestar import Request, Response
from litestar.enums import MediaType

from switchyard.platform.billing.money import format_minor
from switchyard.platform.console.edge import CONSOLE_PREFIX, USER_KEY

__all__ = ["SECURITY_HEADERS", "render"]

# Everything the pages load comes from this server: no CDN, no inline script, no framing.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def _chip_hours(chip_us: int) -> str:
    return f"{Decimal(chip_us) / Decimal(3_600_000_000):,.6f}"


_environment = Environment(
    loader=PackageLoader("switchyard.platform.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_environment.filters["when"] = _when
_environment.filters["chip_hours"] = _chip_hours
_environment.filters["money"] = format_minor  # minor units to the major unit's exact decimal text
_environment.globals["prefix"] = CONSOLE_PREFIX


def render(
    request: Request[Any, Any, Any],
    template: str,
    *,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Response[str]:
    """The page ``template`` rendered with ``context`` (plus the signed-in member and the current path)."""
    body = _environment.get_template(template).render(
        user=request.scope.get(USER_KEY),  # type: ignore[call-overload,unused-ignore]
        path=request.url.path,
        **context,
    )
    return Response(
        body,
        status_code=status_code,
        media_type=MediaType.HTML,
        headers={**SECURITY_HEADERS, **(headers or {})},
    )
