"""Members: list, invite (an invitation link shown once to the inviter), re-invite or revoke a pending
invitation, issue a password-reset link, change role, remove; and one's own password. A thin layer over
``members.service``, ``identity.invitations`` and ``identity.password_resets``, whose role rules (nobody manages a
role above their own, a tenant keeps an owner) answer here as they do in the API: a refused change comes back
to this page with the reason.

With ``SWITCHYARD_SMTP_URL`` the invitation and reset links are e-mailed to the member instead of shown (the
page shows the link after all when the mail server fails). The mail goes before the request's commit, so in the
rare case the commit fails the mailed link does not work, and the inviter sees the error."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from pydantic import ValidationError

from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.flash import redirect_with_flash, render_with_flash
from switchyard.platform.console.pages.invitations import invitation_url
from switchyard.platform.console.pages.password_reset import reset_mail_body
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import Conflict, InvalidRequest
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity import invitations
from switchyard.platform.identity.attempts import spend_attempt
from switchyard.platform.identity.invitations import IssuedInvitation
from switchyard.platform.identity.mail import MailNotSent, mailer_of
from switchyard.platform.identity.password_resets import ADMIN_RESET_LIFETIME, IssuedReset, issue_reset, reset_link
from switchyard.platform.identity.passwords import (
    MAX_PASSWORD_LENGTH,
    check_new_password,
    set_password,
    verify_password,
)
from switchyard.platform.identity.sessions import password_hash_of
from switchyard.platform.limits import LimitsUnavailable
from switchyard.platform.members import service
from switchyard.platform.members.schemas import MemberCreate
from switchyard.platform.models import utc_now

__all__ = ["MemberPagesController", "PasswordController"]

log = logging.getLogger(__name__)


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


async def _mailed(request: Request[Any, Any, Any], *, to: str, subject: str, body: str) -> str | None:
    """Mail ``body`` when ``SWITCHYARD_SMTP_URL`` is set: the address it went to, else ``None`` (show the link)."""
    mailer = mailer_of(request.app.state.settings)
    if mailer is None:
        return None
    try:
        await mailer.send(to=to, subject=subject, body=body)
    except MailNotSent as error:
        log.warning("console mail not sent: %s", error)
        return None
    return to


def _invitation_mail(link: str, issued: IssuedInvitation, tenant_name: str) -> str:
    return (
        f"You are invited to {tenant_name} on Switchyard as a {issued.invitation.role.value}.\n\n"
        f"Choose your console password here (the link works once, until "
        f"{issued.invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n\n{link}\n"
    )


def _sentence(error: Conflict) -> str:
    """A refusal's reason as the page shows it (“A tenant must keep at least one owner.”)."""
    text = str(error.detail)
    return f"{text[:1].upper()}{text[1:]}."


def _role(value: Any) -> Role:
    try:
        return Role(str(value))
    except ValueError:
        raise InvalidRequest("choose a role", param="role", code="invalid_value") from None


class MemberPagesController(Controller):
    path = "/members"

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        issued: IssuedInvitation | None = None,
        reset: IssuedReset | None = None,
        mailed_to: str | None = None,
        error: str | None = None,
        status_code: int = 200,
    ) -> Response[str]:
        user = console_user(request)
        members = await service.list_members(
            db_session, scope=user.scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
        )
        can_manage = user.role.includes(Role.ADMIN)
        pending = await invitations.list_pending(db_session, scope=user.scope) if can_manage else []
        return render_with_flash(
            request,
            "members.html",
            status_code=status_code,
            members=members.data,
            pending=pending,
            pending_ids={i.member_id for i in pending},
            now=utc_now(),
            issued=issued if not mailed_to else None,
            invite_link=invitation_url(request, issued.secret) if issued else None,
            reset=reset if not mailed_to else None,
            reset_link=reset_link(str(request.base_url), reset.secret) if reset else None,
            mailed_to=mailed_to,
            error=error,
            can_manage=can_manage,
            roles=[r.value for r in Role if user.role.includes(r)],
        )

    @get("/", opt=console_access(Role.VIEWER))
    async def list_members(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._page(request, db_session)

    @post("/", opt=console_access(Role.ADMIN), status_code=200)
    async def invite(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        """Add a member and show their invitation link this once (the inviter passes it on)."""
        user = console_user(request)
        form = await request.form()
        try:
            data = MemberCreate.model_validate({"email": str(form.get("email", "")), "role": _role(form.get("role"))})
        except ValidationError:
            return await self._page(request, db_session, error="Enter a valid email address.", status_code=400)
        try:
            issued = await invitations.invite_member(
                db_session,
                scope=user.scope,
                actor=_actor(request),
                actor_role=user.role,
                email=data.email,
                role=data.role,
            )
        except Conflict as error:
            return await self._page(request, db_session, error=_sentence(error), status_code=409)
        return await self._invited(request, db_session, issued)

    async def _invited(
        self, request: Request[Any, Any, Any], db_session: DbSession, issued: IssuedInvitation
    ) -> Response[str]:
        """The invitation's link: mailed to the member with ``SWITCHYARD_SMTP_URL``, else shown this once."""
        tenant_name = console_user(request).tenant_name
        mailed_to = await _mailed(
            request,
            to=issued.invitation.email,
            subject=f"You are invited to {tenant_name} on Switchyard",
            body=_invitation_mail(invitation_url(request, issued.secret), issued, tenant_name),
        )
        return await self._page(request, db_session, issued=issued, mailed_to=mailed_to)

    @post("/invitations/{invitation_id:str}/reinvite", opt=console_access(Role.ADMIN), status_code=200)
    async def reinvite(
        self, request: Request[Any, Any, Any], db_session: DbSession, invitation_id: FromPath[str]
    ) -> Response[str]:
        """A new link for a pending invitation, shown this once; the old link stops working."""
        user = console_user(request)
        issued = await invitations.reissue_invitation(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, invitation_id=invitation_id
        )
        return await self._invited(request, db_session, issued)

    @post("/invitations/{invitation_id:str}/revoke", opt=console_access(Role.ADMIN), status_code=303)
    async def revoke_invitation(
        self, request: Request[Any, Any, Any], db_session: DbSession, invitation_id: FromPath[str]
    ) -> Response[Any]:
        """Withdraw a pending invitation: its link stops working and the member who never joined is removed."""
        user = console_user(request)
        await invitations.revoke_invitation(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, invitation_id=invitation_id
        )
        return redirect_with_flash(f"{CONSOLE_PREFIX}/members", "The invitation is revoked.")

    @post("/{member_id:str}/password-reset", opt=console_access(Role.ADMIN), status_code=200)
    async def reset_password(
        self, request: Request[Any, Any, Any], db_session: DbSession, member_id: FromPath[str]
    ) -> Response[str]:
        """A one-time link with which the member chooses a new password: mailed with ``SWITCHYARD_SMTP_URL``,
        else shown this once to pass on. A newer link replaces an older one."""
        user = console_user(request)
        reset = await issue_reset(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, member_id=member_id
        )
        hours = int(ADMIN_RESET_LIFETIME.total_seconds() // 3600)
        mailed_to = await _mailed(
            request,
            to=reset.reset.email,
            subject=f"Reset your Switchyard password ({user.tenant_name})",
            body=reset_mail_body(reset_link(str(request.base_url), reset.secret), user.tenant_name, f"{hours} hours"),
        )
        return await self._page(request, db_session, reset=reset, mailed_to=mailed_to)

    @post("/{member_id:str}/role", opt=console_access(Role.ADMIN), status_code=303)
    async def change_role(
        self, request: Request[Any, Any, Any], db_session: DbSession, member_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        role = _role((await request.form()).get("role"))
        try:
            changed = await service.change_role(
                db_session,
                scope=user.scope,
                actor=_actor(request),
                actor_role=user.role,
                member_id=member_id,
                role=role,
            )
        except Conflict as error:
            return await self._page(request, db_session, error=_sentence(error), status_code=409)
        return redirect_with_flash(f"{CONSOLE_PREFIX}/members", f"{changed.email} is now a {changed.role.value}.")

    @post("/{member_id:str}/remove", opt=console_access(Role.ADMIN), status_code=303)
    async def remove(
        self, request: Request[Any, Any, Any], db_session: DbSession, member_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        try:
            member = await service.get_member(db_session, scope=user.scope, member_id=member_id)
            await service.remove_member(
                db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, member_id=member_id
            )
        except Conflict as error:
            return await self._page(request, db_session, error=_sentence(error), status_code=409)
        return redirect_with_flash(f"{CONSOLE_PREFIX}/members", f"{member.email} is removed.")


class PasswordController(Controller):
    path = "/password"

    @get("/", opt=console_access("signed_in"))
    async def form(self, request: Request[Any, Any, Any]) -> Response[str]:
        return render(request, "password.html")

    @post("/", opt=console_access("signed_in"), status_code=200)
    async def change(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        """Change one's own password: the current one is asked again (a left-open browser cannot change it), and
        wrong guesses spend the sign-in's allowance of the member's email (a stolen session guesses no faster)."""
        user = console_user(request)
        form = await request.form()
        current = str(form.get("current_password", ""))[:MAX_PASSWORD_LENGTH]
        new = str(form.get("new_password", ""))
        try:
            attempt = await spend_attempt(request, "console-sign-in", user.email)
        except LimitsUnavailable:
            return render(request, "password.html", status_code=503, error="Password changes are unavailable now.")
        if attempt.refused_by is not None:
            error = f"Too many wrong passwords. Try again in {attempt.retry_after_s} seconds."
            retry_after = {"retry-after": str(attempt.retry_after_s)}
            return render(request, "password.html", status_code=429, headers=retry_after, error=error)
        stored = await password_hash_of(db_session, scope=user.scope, member_id=user.member_id)
        if not await verify_password(stored, current):
            return render(request, "password.html", status_code=400, error="The current password is wrong.")
        await attempt.succeeded()
        try:
            check_new_password(new)
        except InvalidRequest as error:
            return render(request, "password.html", status_code=400, error=str(error.detail))
        await set_password(db_session, scope=user.scope, member_id=user.member_id, password=new)
        return render(request, "password.html", notice="Your password is changed.")
