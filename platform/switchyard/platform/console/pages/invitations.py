"""The invitation link's page (public: the invited person has no session yet): set a password, then signed in.

The link's secret is the only credential, so the page is served like the sign-in page (a double-submit CSRF
cookie, no caching, the same-origin referrer policy keeps the path off other sites). An unknown, used or expired
link answers an error page and changes nothing; so does a POST whose password breaks the rules (the form comes
back with the error, the link still unused).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath

from switchyard.platform.auth.principal import Actor
from switchyard.platform.console.edge import CONSOLE_PREFIX, CSRF_COOKIE, console_access
from switchyard.platform.console.pages.auth import console_cookie, signed_in
from switchyard.platform.console.render import render
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.identity.invitations import (
    InvitationNotValid,
    PendingInvitation,
    accept_invitation,
    find_invitation,
    invitation_link,
)
from switchyard.platform.identity.passwords import MAX_PASSWORD_LENGTH, check_new_password, set_password
from switchyard.platform.models import Tenant

if TYPE_CHECKING:  # a type only: pages issue no SQL (the services they call do)
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["InvitationController", "invitation_url"]

_NOT_VALID = {
    InvitationNotValid.Reason.UNKNOWN: (404, "This invitation link is not known. Check that it was copied whole."),
    InvitationNotValid.Reason.USED: (410, "This invitation link was used already: sign in with your password."),
    InvitationNotValid.Reason.EXPIRED: (410, "This invitation link has expired: ask for a new one."),
}


def invitation_url(request: Request[Any, Any, Any], secret: str) -> str:
    """The absolute link a member follows to accept an invitation, on the address this request came to (the CLI
    and the API, with no browser's address at hand, use ``SWITCHYARD_PUBLIC_URL``)."""
    return invitation_link(str(request.base_url), secret)


def _not_valid(request: Request[Any, Any, Any], error: InvitationNotValid) -> Response[str]:
    status, message = _NOT_VALID[error.reason]
    return render(
        request,
        "error.html",
        status_code=status,
        status_code_text=str(status),
        title="Invitation link not valid",
        message=message,
    )


async def _form(
    request: Request[Any, Any, Any],
    session: AsyncSession,
    invitation: PendingInvitation,
    *,
    status_code: int = 200,
    error: str | None = None,
) -> Response[str]:
    tenant = await session.get(Tenant, invitation.tenant_id)
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    response = render(
        request,
        "invitation.html",
        status_code=status_code,
        invitation=invitation,
        tenant_name=tenant.name if tenant else "",
        csrf_token=token,
        error=error,
        action=request.url.path,
    )
    response.set_cookie(console_cookie(CSRF_COOKIE, token, None))
    return response


class InvitationController(Controller):
    path = "/invitations"

    @get("/{secret:str}", opt=console_access("public"))
    async def show(self, request: Request[Any, Any, Any], secret: FromPath[str]) -> Response[str]:
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:  # the link decides the tenant
            try:
                invitation = await find_invitation(session, secret)
            except InvitationNotValid as error:
                return _not_valid(request, error)
            return await _form(request, session, invitation)

    @post("/{secret:str}", opt=console_access("public"), status_code=303)
    async def accept(self, request: Request[Any, Any, Any], secret: FromPath[str]) -> Response[Any]:
        """Set the password, use the link up and sign the member in."""
        password = str((await request.form()).get("new_password", ""))
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:
            try:
                invitation = await find_invitation(session, secret)
            except InvitationNotValid as error:
                return _not_valid(request, error)
            try:
                check_new_password(password[: MAX_PASSWORD_LENGTH + 1])
            except InvalidRequest as error:
                return await _form(request, session, invitation, status_code=400, error=str(error.detail))
            actor = Actor(key_id=invitation.member_id, request_id=request_id_of(request.scope))
            try:
                member = await accept_invitation(session, secret=secret, actor=actor)
            except InvitationNotValid as error:
                return _not_valid(request, error)
            scope = TenantScope(member.tenant_id)
            await set_password(session, scope=scope, member_id=member.id, password=password)
            return await signed_in(session, member=member, actor=actor, next_path=f"{CONSOLE_PREFIX}/")
