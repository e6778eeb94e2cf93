"""The operator pages' edge: the operator cookie becomes an ``OperatorUser``; a member's session does not count.

The console's one guard (``console.edge.require_console_access``) checks routes declared
``console_access("operator")`` against what this middleware resolved.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from switchyard.platform.auth.principal import Actor, Principal
from switchyard.platform.console.edge import OPERATOR_KEY, OPERATOR_PREFIX, USER_KEY, SignInRequired
from switchyard.platform.db import UNSCOPED, Database, scope_session
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity.operator_sessions import OperatorUser, resolve_operator_session

__all__ = ["OPERATOR_SESSION_COOKIE", "OperatorSessionMiddleware", "operator_actor", "operator_cookie", "operator_user"]

OPERATOR_SESSION_COOKIE = "switchyard_operator"  # never the members' cookie: the two sessions never stand in


def operator_cookie(value: str, max_age: int | None) -> Cookie:
    """The operator session's cookie, as hardened as a member's and sent to the operator pages only."""
    return Cookie(
        key=OPERATOR_SESSION_COOKIE,
        value=value,
        path=OPERATOR_PREFIX,
        max_age=max_age,
        httponly=True,
        secure=True,  # browsers keep Secure cookies of http://127.0.0.1 and localhost too
        samesite="lax",
    )


def operator_user(connection: ASGIConnection[Any, Any, Any, Any]) -> OperatorUser:
    """The signed-in operator of a route whose guard required one."""
    operator = connection.scope.get(OPERATOR_KEY)  # type: ignore[call-overload,unused-ignore]
    if not isinstance(operator, OperatorUser):
        raise SignInRequired(connection.url.path)
    return operator


def operator_actor(connection: ASGIConnection[Any, Any, Any, Any]) -> Actor:
    """The audit log's name for the operator: the account's id (``opa_...``)."""
    return Actor(key_id=operator_user(connection).operator_id, request_id=request_id_of(connection.scope))


class OperatorSessionMiddleware(ASGIMiddleware):
    """Resolve the operator cookie (if any) once per operator request.

    The member's session the console's middleware resolved is dropped here, so no member acts on these pages;
    a live operator session becomes the request's ``Principal`` without a tenant, so the request's unit of work is
    unscoped, as an operator key's is.
    """

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        token = ASGIConnection(scope).cookies.get(OPERATOR_SESSION_COOKIE)
        operator: OperatorUser | None = None
        if token:
            database: Database = scope["litestar_app"].state.database
            async with database.session() as session:
                scope_session(session, UNSCOPED)
                operator = await resolve_operator_session(session, token)
                await session.commit()
        scope[USER_KEY] = None  # type: ignore[literal-required]
        scope[OPERATOR_KEY] = operator  # type: ignore[literal-required]
        if operator is not None:
            scope["user"] = Principal(key_id=operator.operator_id, scope=None, role=None)
        else:
            scope.pop("user", None)  # type: ignore[misc]
        await next_app(scope, receive, send)
