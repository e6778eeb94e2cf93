"""The console's edge: the session cookie becomes a ``ConsoleUser``, and one guard covers every page.

Every console route declares ``opt={"console_access": ...}``: ``"public"`` (sign-in, static files),
``"signed_in"``, a minimum ``Role``, or ``"operator"`` (an operator's console session, see ``console.operator``: a
member's session never counts there). Without a live session a page answers 302 to the sign-in page; a role
below the route's is 403, whatever the page showed. Every unsafe request (POST) must carry the session's CSRF
token (form field ``csrf_token`` or header ``X-CSRF-Token``) and, when the browser sends one, an ``Origin`` of
this server; the sign-in form, before there is a session, uses a double-submit cookie instead.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.enums import ScopeType
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import UNSCOPED, Database, scope_session
from switchyard.platform.http.errors import PermissionDenied
from switchyard.platform.identity.sessions import ConsoleUser, resolve_session

__all__ = [
    "CONSOLE_PREFIX",
    "CSRF_COOKIE",
    "OPERATOR_KEY",
    "OPERATOR_PREFIX",
    "SESSION_COOKIE",
    "USER_KEY",
    "ConsoleSessionMiddleware",
    "SignInRequired",
    "console_access",
    "console_user",
    "require_console_access",
    "sign_in_url",
]

log = logging.getLogger(__name__)

CONSOLE_PREFIX = "/console"
SESSION_COOKIE = "switchyard_console"
CSRF_COOKIE = "switchyard_console_csrf"  # the sign-in form's double-submit token (no session yet)
USER_KEY = "switchyard_console_user"
OPERATOR_PREFIX = f"{CONSOLE_PREFIX}/operator"
OPERATOR_KEY = "switchyard_console_operator"  # the signed-in operator (console.operator's middleware sets it)
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class SignInRequired(Exception):
    """No live console session: the page answers a redirect to the sign-in page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def console_access(level: str | Role) -> dict[str, Any]:
    """The ``opt`` of a console route that ``level`` may use."""
    return {"console_access": level}


def console_user(connection: ASGIConnection[Any, Any, Any, Any]) -> ConsoleUser:
    """The signed-in member of a route whose guard required a session."""
    user = _user_of(connection.scope)
    if user is None:
        raise SignInRequired(connection.url.path)
    return user


def _user_of(scope: Any) -> ConsoleUser | None:
    user = scope.get(USER_KEY)
    return user if isinstance(user, ConsoleUser) else None


class ConsoleSessionMiddleware(ASGIMiddleware):
    """Resolve the session cookie (if any) once per console request.

    A live session also becomes the request's ``Principal`` (key id: the member's id, so the audit log names the
    member), which gives the request's unit of work the member's tenant scope.
    """

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        token = ASGIConnection(scope).cookies.get(SESSION_COOKIE)
        user: ConsoleUser | None = None
        if token:
            database: Database = scope["litestar_app"].state.database
            async with database.session() as session:
                scope_session(session, UNSCOPED)  # the cookie decides the tenant, so the lookup cannot be scoped
                user = await resolve_session(session, token)
                await session.commit()
        scope[USER_KEY] = user  # type: ignore[literal-required]
        if user is not None:
            scope["user"] = Principal(key_id=user.member_id, scope=user.scope, role=user.role)
        await next_app(scope, receive, send)


def _same_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    origin = connection.headers.get("origin")
    if origin is None:
        return True  # no Origin header (older browsers): the token still decides
    host = connection.headers.get("host", "")
    return urlsplit(origin).netloc == host


async def _presented_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    header = connection.headers.get("x-csrf-token")
    if header:
        return header
    request: Request[Any, Any, Any] = Request(connection.scope, connection.receive)
    if request.content_type[0] in ("application/x-www-form-urlencoded", "multipart/form-data"):
        value = (await request.form()).get("csrf_token")  # parsed once; the handler reads the same form
        return value if isinstance(value, str) else ""
    return ""


async def _check_csrf(connection: ASGIConnection[Any, Any, Any, Any], expected: str) -> None:
    if not _same_origin(connection):
        raise PermissionDenied("this form was sent from another site", code="csrf_failed")
    presented = await _presented_token(connection)
    if not expected or not presented or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise PermissionDenied("the form's security token is missing or stale: reload the page", code="csrf_failed")


async def require_console_access(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """The console's one guard (async: Litestar runs sync guards in a thread)."""
    level = handler.opt.get("console_access")
    if level is None:
        raise RuntimeError(f"console route {handler!r} declares no console_access")
    unsafe = connection.scope.get("method", "GET") in _UNSAFE
    if level == "public":
        if unsafe:
            await _check_csrf(connection, connection.cookies.get(CSRF_COOKIE, ""))
        return
    if level == "operator":
        operator: Any = connection.scope.get(OPERATOR_KEY)  # type: ignore[call-overload,unused-ignore]
        if operator is None:
            raise SignInRequired(connection.url.path if not unsafe else f"{OPERATOR_PREFIX}/")
        if unsafe:
            await _check_csrf(connection, str(operator.csrf_token))
        return
    user = _user_of(connection.scope)
    if user is None:
        raise SignInRequired(connection.url.path if not unsafe else CONSOLE_PREFIX)
    if unsafe:
        await _check_csrf(connection, user.csrf_token)
    if level == "signed_in":
        return
    needed = Role(level)
    if not user.role.includes(needed):
        raise PermissionDenied(f"this needs role {needed.value} or higher (you are {user.role.value})")


def sign_in_url(next_path: str) -> str:
    if next_path == OPERATOR_PREFIX or next_path.startswith(f"{OPERATOR_PREFIX}/"):
        return f"{OPERATOR_PREFIX}/sign-in?next={quote(next_path, safe='/')}"
    return f"{CONSOLE_PREFIX}/sign-in?next={quote(next_path, safe='/')}"
