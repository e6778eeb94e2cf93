"""Operator sign-in and sign-out: the members' sign-in form and limits, audited in the operator audit log."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.audit.service import record_operator
from switchyard.platform.auth.principal import Actor
from switchyard.platform.console.edge import CONSOLE_PREFIX, CSRF_COOKIE, OPERATOR_KEY, OPERATOR_PREFIX, console_access
from switchyard.platform.console.operator.edge import (
    OPERATOR_SESSION_COOKIE,
    operator_actor,
    operator_cookie,
    operator_user,
)
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.deps import DbSession
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity.attempts import spend_attempt
from switchyard.platform.identity.operator_accounts import find_operator_account
from switchyard.platform.identity.operator_sessions import end_operator_session, start_operator_session
from switchyard.platform.identity.passwords import (
    MAX_PASSWORD_LENGTH,
    hash_password,
    password_needs_rehash,
    verify_password,
)
from switchyard.platform.identity.sessions import SESSION_LIFETIME
from switchyard.platform.limits import LimitsUnavailable

__all__ = ["OperatorSignInController"]

log = logging.getLogger(__name__)

_HOME = f"{OPERATOR_PREFIX}/"


def _safe_next(value: Any) -> str:
    """Only a path among the operator pages: never another site (``//evil``), a scheme or a tenant page."""
    if (
        isinstance(value, str)
        and value.startswith(OPERATOR_PREFIX)
        and not value.startswith(f"{OPERATOR_PREFIX}/sign-")
        and not any(bad in value for bad in ("//", "\\", "\n", "\r"))
    ):
        return value
    return _HOME


def _sign_in_page(
    request: Request[Any, Any, Any], *, status_code: int = 200, error: str | None = None, **context: Any
) -> Response[str]:
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(
        request,
        "operator_sign_in.html",
        status_code=status_code,
        error=error,
        csrf_token=token,
        next=_safe_next(context.pop("next", request.query_params.get("next"))),
        **context,
    )
    response.set_cookie(  # the members' double-submit cookie: one sign-in form token for the whole console
        Cookie(key=CSRF_COOKIE, value=token, path=CONSOLE_PREFIX, httponly=True, secure=True, samesite="lax")
    )
    return response


class OperatorSignInController(Controller):
    path = "/"

    @get("/sign-in", opt=console_access("public"))
    async def sign_in_form(self, request: Request[Any, Any, Any]) -> Response[Any]:
        if request.scope.get(OPERATOR_KEY) is not None:  # type: ignore[call-overload,unused-ignore]
            return Redirect(_safe_next(request.query_params.get("next")), status_code=303)
        notice = "You are signed out." if request.query_params.get("signed_out") else None
        return _sign_in_page(request, notice=notice)

    @post("/sign-in", opt=console_access("public"), status_code=303)
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:
            return await self._sign_in(request, session)

    async def _sign_in(self, request: Request[Any, Any, Any], db_session: AsyncSession) -> Response[Any]:
        form = await request.form()
        email = str(form.get("email", "")).strip().lower()[:320]
        password = str(form.get("password", ""))[:MAX_PASSWORD_LENGTH]
        next_path = _safe_next(form.get("next"))
        try:
            attempt = await spend_attempt(request, "operator-sign-in", email)
        except LimitsUnavailable:
            return _sign_in_page(request, status_code=503, error="Sign-in is unavailable right now.", email=email)
        client = attempt.client
        if attempt.refused_by is not None:
            log.warning("operator sign-in refused: too many attempts (%s)", attempt.refused_by)
            record_operator(
                db_session,
                actor=Actor(key_id="console", request_id=request_id_of(request.scope)),
                action="operator_console.sign_in_limited",
                target_type="operator_account",
                target_id="",
                details={"email": email, "client": client},
            )
            return _sign_in_page(
                request,
                status_code=429,
                error=f"Too many sign-in attempts. Try again in {attempt.retry_after_s} seconds.",
                email=email,
                next=next_path,
                headers={"retry-after": str(attempt.retry_after_s)},
            )
        account = await find_operator_account(db_session, email) if email else None
        matches = await verify_password(account.password_hash if account else None, password)  # same work either way
        if account is None or not matches or account.disabled_at is not None:
            record_operator(
                db_session,
                actor=Actor(key_id="console", request_id=request_id_of(request.scope)),
                action="operator_console.sign_in_failed",
                target_type="operator_account",
                target_id=account.id if account else "",
                details={"email": email, "client": client},
            )
            return _sign_in_page(
                request, status_code=401, error="Wrong email or password.", email=email, next=next_path
            )
        await attempt.succeeded()
        if password_needs_rehash(account.password_hash):  # hashed at another cost than today's
            account.password_hash = await hash_password(password)
        token, session_id = await start_operator_session(db_session, account=account)
        record_operator(
            db_session,
            actor=Actor(key_id=account.id, request_id=request_id_of(request.scope)),
            action="operator_console.sign_in",
            target_type="operator_session",
            target_id=session_id,
            details={"client": client},
        )
        response: Response[Any] = Redirect(next_path, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(operator_cookie(token, int(SESSION_LIFETIME.total_seconds())))
        return response

    @post("/sign-out", opt=console_access("operator"), status_code=303)
    async def sign_out(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        operator = operator_user(request)
        await end_operator_session(db_session, session_id=operator.session_id)
        record_operator(
            db_session,
            actor=operator_actor(request),
            action="operator_console.sign_out",
            target_type="operator_session",
            target_id=operator.session_id,
        )
        response: Response[Any] = Redirect(f"{OPERATOR_PREFIX}/sign-in?signed_out=1", status_code=303)
        response.delete_cookie(OPERATOR_SESSION_COOKIE, path=OPERATOR_PREFIX)
        return response
