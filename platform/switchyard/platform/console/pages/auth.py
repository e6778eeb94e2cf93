"""Sign-in and sign-out. Failed sign-ins are rate-limited (per account and client address, per client address and
per account: :mod:`~switchyard.platform.identity.attempts`) and audited."""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.response import Redirect

from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.console.edge import (
    CONSOLE_PREFIX,
    CSRF_COOKIE,
    SESSION_COOKIE,
    USER_KEY,
    console_access,
    console_user,
)
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity.attempts import spend_attempt
from switchyard.platform.identity.passwords import MAX_PASSWORD_LENGTH, rehash_member_password, verify_password
from switchyard.platform.identity.sessions import SESSION_LIFETIME, end_session, find_sign_in_candidates, start_session
from switchyard.platform.limits import LimitsUnavailable
from switchyard.platform.models import Member

if TYPE_CHECKING:  # a type only: pages issue no SQL (the services they call do)
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["SignInController", "console_cookie", "signed_in"]

log = logging.getLogger(__name__)

_SIGNED_OUT_NOTICE = "You are signed out."


def _safe_next(value: Any) -> str:
    """Only a path inside the console: never another site (``//evil``) or a scheme."""
    if (
        isinstance(value, str)
        and value.startswith(CONSOLE_PREFIX)
        and not any(bad in value for bad in ("//", "\\", "\n", "\r"))
    ):
        return value
    return f"{CONSOLE_PREFIX}/"


def console_cookie(key: str, value: str, max_age: int | None) -> Cookie:
    """A console cookie: HTTP only, Secure, same-site lax, for the console's paths only."""
    return Cookie(
        key=key,
        value=value,
        path=CONSOLE_PREFIX,
        max_age=max_age,
        httponly=True,
        secure=True,  # browsers keep Secure cookies of http://127.0.0.1 and localhost too; anything else is https
        samesite="lax",
    )


def _sign_in_page(
    request: Request[Any, Any, Any], *, status_code: int = 200, error: str | None = None, **context: Any
) -> Response[str]:
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(
        request,
        "sign_in.html",
        status_code=status_code,
        error=error,
        csrf_token=token,
        next=_safe_next(context.pop("next", request.query_params.get("next"))),
        **context,
    )
    response.set_cookie(console_cookie(CSRF_COOKIE, token, None))
    return response


async def signed_in(db_session: AsyncSession, *, member: Member, actor: Actor, next_path: str) -> Response[Any]:
    """Start ``member``'s session (audited ``console.sign_in``) and answer a redirect to ``next_path`` with its
    cookie: the end of a sign-in and of an accepted invitation."""
    token, row = await start_session(db_session, member=member)
    record(
        db_session,
        tenant_id=member.tenant_id,
        actor=actor,
        action="console.sign_in",
        target_type="console_session",
        target_id=row.id,
    )
    response: Response[Any] = Redirect(_safe_next(next_path), status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(console_cookie(SESSION_COOKIE, token, int(SESSION_LIFETIME.total_seconds())))
    return response


class SignInController(Controller):
    path = "/"

    @get("/sign-in", opt=console_access("public"))
    async def sign_in_form(self, request: Request[Any, Any, Any]) -> Response[Any]:
        if request.scope.get(USER_KEY) is not None:  # type: ignore[call-overload,unused-ignore]
            return Redirect(_safe_next(request.query_params.get("next")), status_code=303)  # already signed in
        notice = _SIGNED_OUT_NOTICE if request.query_params.get("signed_out") else None
        return _sign_in_page(request, notice=notice)

    @post("/sign-in", opt=console_access("public"), status_code=303)
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:  # the email decides the tenant: not the cookie's
            return await self._sign_in(request, session)

    async def _sign_in(self, request: Request[Any, Any, Any], db_session: AsyncSession) -> Response[Any]:
        form = await request.form()
        email = str(form.get("email", "")).strip().lower()[:320]
        password = str(form.get("password", ""))[:MAX_PASSWORD_LENGTH]
        next_path = _safe_next(form.get("next"))
        try:
            attempt = await spend_attempt(request, "console-sign-in", email)
        except LimitsUnavailable:
            return _sign_in_page(request, status_code=503, error="Sign-in is unavailable right now.", email=email)
        if attempt.refused_by is not None:
            log.warning("console sign-in refused: too many attempts (%s)", attempt.refused_by)
            return _sign_in_page(
                request,
                status_code=429,
                error=f"Too many sign-in attempts. Try again in {attempt.retry_after_s} seconds.",
                email=email,
                next=next_path,
                headers={"retry-after": str(attempt.retry_after_s)},
            )
        candidates = await find_sign_in_candidates(db_session, email) if email else []
        member, member_hash = None, ""
        for candidate, password_hash in candidates:
            if await verify_password(password_hash, password):
                member, member_hash = candidate, password_hash or ""
                break
        if not candidates:
            await verify_password(None, password)  # the same work as for a known email: no timing hint
        actor = Actor(key_id=member.id if member else "console", request_id=request_id_of(request.scope))
        if member is None:
            for candidate, _ in candidates:  # each tenant sees the failed attempts on its members
                record(
                    db_session,
                    tenant_id=candidate.tenant_id,
                    actor=actor,
                    action="console.sign_in_failed",
                    target_type="member",
                    target_id=candidate.id,
                    details={"client": attempt.client},
                )
            if not candidates:
                log.info("console sign-in failed for an unknown email")
            return _sign_in_page(
                request, status_code=401, error="Wrong email or password.", email=email, next=next_path
            )
        await attempt.succeeded()
        scope = TenantScope(member.tenant_id)
        await rehash_member_password(
            db_session, scope=scope, member_id=member.id, password_hash=member_hash, password=password
        )
        return await signed_in(db_session, member=member, actor=actor, next_path=next_path)

    @post("/sign-out", opt=console_access("signed_in"), status_code=303)
    async def sign_out(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        user = console_user(request)
        await end_session(db_session, scope=user.scope, session_id=user.session_id)
        record(
            db_session,
            tenant_id=user.scope.tenant_id,
            actor=Actor(key_id=user.member_id, request_id=request_id_of(request.scope)),
            action="console.sign_out",
            target_type="console_session",
            target_id=user.session_id,
        )
        response: Response[Any] = Redirect(f"{CONSOLE_PREFIX}/sign-in?signed_out=1", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=CONSOLE_PREFIX)
        return response
