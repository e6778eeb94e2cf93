"""Members: list, invite (an invitation link shown once to the inviter), re-invite or revoke a pending
invitation, change role, remove; and one's own password. A thin layer over ``members.service`` and
``members.invitations``, whose role rules (nobody manages a role above their own, a tenant keeps an owner) answer
here as they do in the API."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.invitations import invitation_url
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity import invitations
from switchyard.platform.identity.attempts import spend_attempt
from switchyard.platform.identity.invitations import IssuedInvitation
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


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


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
        error: str | None = None,
        status_code: int = 200,
    ) -> Response[str]:
        user = console_user(request)
        members = await service.list_members(
            db_session, scope=user.scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
        )
        can_manage = user.role.includes(Role.ADMIN)
        pending = await invitations.list_pending(db_session, scope=user.scope) if can_manage else []
        return render(
            request,
            "members.html",
            status_code=status_code,
            members=members.data,
            pending=pending,
            pending_ids={i.member_id for i in pending},
            now=utc_now(),
            issued=issued,
            invite_link=invitation_url(request, issued.secret) if issued else None,
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
        issued = await invitations.invite_member(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, email=data.email, role=data.role
        )
        return await self._page(request, db_session, issued=issued)

    @post("/invitations/{invitation_id:str}/reinvite", opt=console_access(Role.ADMIN), status_code=200)
    async def reinvite(
        self, request: Request[Any, Any, Any], db_session: DbSession, invitation_id: FromPath[str]
    ) -> Response[str]:
        """A new link for a pending invitation, shown this once; the old link stops working."""
        user = console_user(request)
        issued = await invitations.reissue_invitation(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, invitation_id=invitation_id
        )
        return await self._page(request, db_session, issued=issued)

    @post("/invitations/{invitation_id:str}/revoke", opt=console_access(Role.ADMIN), status_code=303)
    async def revoke_invitation(
        self, request: Request[Any, Any, Any], db_session: DbSession, invitation_id: FromPath[str]
    ) -> Response[Any]:
        """Withdraw a pending invitation: its link stops working and the member who never joined is removed."""
        user = console_user(request)
        await invitations.revoke_invitation(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, invitation_id=invitation_id
        )
        return Redirect(f"{CONSOLE_PREFIX}/members", status_code=303)

    @post("/{member_id:str}/role", opt=console_access(Role.ADMIN), status_code=303)
    async def change_role(
        self, request: Request[Any, Any, Any], db_session: DbSession, member_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        role = _role((await request.form()).get("role"))
        await service.change_role(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, member_id=member_id, role=role
        )
        return Redirect(f"{CONSOLE_PREFIX}/members", status_code=303)

    @post("/{member_id:str}/remove", opt=console_access(Role.ADMIN), status_code=303)
    async def remove(
        self, request: Request[Any, Any, Any], db_session: DbSession, member_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        await service.remove_member(
            db_session, scope=user.scope, actor=_actor(request), actor_role=user.role, member_id=member_id
        )
        return Redirect(f"{CONSOLE_PREFIX}/members", status_code=303)


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
