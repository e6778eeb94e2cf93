"""A forgotten password: *Forgot your password?* on the sign-in page, and the reset link's page (both public).

With ``SWITCHYARD_SMTP_URL`` the member asks for a link by e-mail: the answer is the same whether the address is
a member's or not (it tells nobody who has an account), and asking spends the sign-in's kind of allowance
(:mod:`~switchyard.platform.identity.attempts`: a few per address and client, every request counted), so the
form cannot flood an inbox. Without it the page says to ask an admin or owner, who issues a link on the Members
page. The link's page is served like the invitation's: a double-submit CSRF cookie, and an unknown, used or
expired link answers an error page that changes nothing.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath

from switchyard.platform.auth.principal import Actor
from switchyard.platform.console.edge import CONSOLE_PREFIX, CSRF_COOKIE, console_access
from switchyard.platform.console.pages.auth import console_cookie, signed_in
from switchyard.platform.console.render import render
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity.attempts import spend_attempt
from switchyard.platform.identity.mail import MailNotSent, mailer_of
from switchyard.platform.identity.password_resets import (
    SELF_RESET_LIFETIME,
    ResetNotValid,
    find_reset,
    issue_self_resets,
    reset_link,
    use_reset,
)
from switchyard.platform.identity.passwords import MAX_PASSWORD_LENGTH, check_new_password
from switchyard.platform.limits import LimitsUnavailable

__all__ = ["PasswordResetController", "reset_mail_body"]

log = logging.getLogger(__name__)

_NOT_VALID = {
    ResetNotValid.Reason.UNKNOWN: (404, "This password-reset link is not known. Check that it was copied whole."),
    ResetNotValid.Reason.USED: (410, "This password-reset link was used already: sign in with your new password."),
    ResetNotValid.Reason.EXPIRED: (410, "This password-reset link has expired: ask for a new one."),
}
_ASKED = "If that address belongs to a member, a link to choose a new password is on its way. It works once, for {}."


def reset_mail_body(link: str, tenant_name: str, valid_for: str) -> str:
    """The text of a password-reset e-mail (the Members page's mailed links too)."""
    return (
        f"Someone asked to reset your Switchyard console password for {tenant_name}.\n\n"
        f"Choose a new password here (the link works once, for {valid_for}):\n\n{link}\n\n"
        "If it was not you, ignore this message: your password stays as it is.\n"
    )


def _public_page(
    request: Request[Any, Any, Any], template: str, *, status_code: int = 200, **context: Any
) -> Response[str]:
    """A page with a form but no session: its CSRF token is the double-submit cookie's."""
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(request, template, status_code=status_code, csrf_token=token, **context)
    response.set_cookie(console_cookie(CSRF_COOKIE, token, None))
    return response


def _not_valid(request: Request[Any, Any, Any], error: ResetNotValid) -> Response[str]:
    status, message = _NOT_VALID[error.reason]
    return render(
        request,
        "error.html",
        status_code=status,
        status_code_text=str(status),
        title="Password-reset link not valid",
        message=message,
    )


class PasswordResetController(Controller):
    path = "/password-reset"

    @get("/", opt=console_access("public"))
    async def forgot(self, request: Request[Any, Any, Any]) -> Response[str]:
        mails = mailer_of(request.app.state.settings) is not None
        return _public_page(request, "password_forgot.html", mails=mails)

    @post("/", opt=console_access("public"), status_code=200)
    async def ask(self, request: Request[Any, Any, Any]) -> Response[str]:
        """Mail a reset link to each membership of the address (the same answer whether there is one or not)."""
        mailer = mailer_of(request.app.state.settings)
        if mailer is None:
            return _public_page(request, "password_forgot.html", status_code=400, mails=False)
        email = str((await request.form()).get("email", "")).strip().lower()[:320]
        if "@" not in email:
            error = "Enter the e-mail address you sign in with."
            return _public_page(request, "password_forgot.html", status_code=400, mails=True, error=error)
        try:
            attempt = await spend_attempt(request, "console-password-reset", email)
        except LimitsUnavailable:
            error = "Password resets are unavailable right now."
            return _public_page(request, "password_forgot.html", status_code=503, mails=True, error=error)
        if attempt.refused_by is not None:
            error = f"Too many requests. Try again in {attempt.retry_after_s} seconds."
            headers = {"retry-after": str(attempt.retry_after_s)}
            return _public_page(
                request, "password_forgot.html", status_code=429, headers=headers, mails=True, error=error
            )
        database: Database = request.app.state.database
        base_url = str(request.base_url)
        letters: list[tuple[str, str]] = []
        async with database.unit_of_work(UNSCOPED) as session:  # the address decides the tenants
            for asked in await issue_self_resets(session, email=email, request_id=request_id_of(request.scope)):
                letters.append((asked.tenant_name, reset_link(base_url, asked.issued.secret)))
        for tenant_name, link in letters:  # after the commit: a mailed link works at once
            body = reset_mail_body(link, tenant_name, _valid_for())
            try:
                await mailer.send(to=email, subject=f"Reset your Switchyard password ({tenant_name})", body=body)
            except MailNotSent as error:
                log.warning("password-reset mail not sent: %s", error)
        notice = _ASKED.format(_valid_for())
        return _public_page(request, "password_forgot.html", mails=True, notice=notice)

    @get("/{secret:str}", opt=console_access("public"))
    async def show(self, request: Request[Any, Any, Any], secret: FromPath[str]) -> Response[str]:
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:  # the link decides the tenant
            try:
                reset = await find_reset(session, secret)
            except ResetNotValid as error:
                return _not_valid(request, error)
        return _public_page(request, "password_reset.html", reset=reset, action=request.url.path)

    @post("/{secret:str}", opt=console_access("public"), status_code=303)
    async def use(self, request: Request[Any, Any, Any], secret: FromPath[str]) -> Response[Any]:
        """Set the new password, use the link up, end the member's other sessions and sign them in."""
        password = str((await request.form()).get("new_password", ""))
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:
            try:
                reset = await find_reset(session, secret)
            except ResetNotValid as error:
                return _not_valid(request, error)
            try:
                check_new_password(password[: MAX_PASSWORD_LENGTH + 1])
            except InvalidRequest as error:
                return _public_page(
                    request,
                    "password_reset.html",
                    status_code=400,
                    reset=reset,
                    action=request.url.path,
                    error=str(error.detail),
                )
            actor = Actor(key_id=reset.member_id, request_id=request_id_of(request.scope))
            try:
                member = await use_reset(session, secret=secret, password=password, actor=actor)
            except ResetNotValid as error:
                return _not_valid(request, error)
            return await signed_in(session, member=member, actor=actor, next_path=f"{CONSOLE_PREFIX}/")


def _valid_for() -> str:
    return f"{int(SELF_RESET_LIFETIME.total_seconds() // 60)} minutes"
