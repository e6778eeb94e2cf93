"""Invitation links over HTTP: shown once, used once, for seven days; re-invite and revoke; the role rules."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from switchyard.platform.db import UNSCOPED
from switchyard.platform.identity.invitations import INVITATION_LIFETIME
from switchyard.platform.models import MemberInvitation
from tests.platform.console.factories import csrf_of, page_csrf, sign_in

LINK = re.compile(r'id="invite-link" readonly value="https://switchyard\.test(/console/invitations/[^"]+)"')
NEW_PASSWORD = "a password of my own choosing"


async def _invite(console: Any, email: str, role: str = "developer") -> str:
    """Invite as the signed-in member; the link's path."""
    csrf = await page_csrf(console, "/console/members")
    invited = await console.post("/console/members", data={"email": email, "role": role, "csrf_token": csrf})
    assert invited.status_code == 200, invited.text
    found = LINK.search(invited.text)
    assert found, "the answer shows no invitation link"
    return found.group(1)


async def _accept(console: Any, link: str, password: str = NEW_PASSWORD) -> Any:
    """Open the link without a session and submit its form, as the invited person's browser does."""
    console.cookies.clear()
    form = await console.get(link)
    assert form.status_code == 200, form.text
    return await console.post(link, data={"new_password": password, "csrf_token": csrf_of(form.text)})


async def _audit_actions(console: Any, tenant: Any) -> list[str]:
    listed = await console.get("/v1/audit-log", params={"limit": 100}, headers=tenant.headers())
    assert listed.status_code == 200, listed.text
    return [event["action"] for event in listed.json()["data"]]


async def test_an_invited_member_sets_a_password_through_the_link_once_and_is_signed_in(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    link = await _invite(console, "New.Dev@Example.com")
    members = (await console.get("/console/members")).text
    assert link not in members  # shown once
    assert "new.dev@example.com (invited)" in members
    assert "Pending invitations" in members

    console.cookies.clear()
    form = await console.get(link)  # no session needed
    assert form.status_code == 200, form.text
    assert "new.dev@example.com" in form.text
    assert "developer" in form.text
    short = await console.post(link, data={"new_password": "short", "csrf_token": csrf_of(form.text)})
    assert short.status_code == 400  # the password-change page's rules ...
    assert "12 to 1024 characters" in short.text
    assert (await console.get(link)).status_code == 200  # ... and the link is still unused

    accepted = await _accept(console, link)
    assert accepted.status_code == 303, accepted.text
    assert accepted.headers["location"] == "/console/"
    overview = await console.get("/console/")
    assert overview.status_code == 200
    assert "new.dev@example.com · developer" in overview.text  # signed in, with the invited role

    console.cookies.clear()
    used = await console.get(link)
    assert used.status_code == 410
    assert "used already" in used.text
    again = await console.post(link, data={"new_password": "somebody else's password", "csrf_token": "x"})
    assert again.status_code in (403, 410)  # no CSRF cookie in this fresh browser, or the used link: unchanged
    assert (await sign_in(console, "new.dev@example.com", "somebody else's password")).status_code == 401
    console.cookies.clear()
    assert (await sign_in(console, "new.dev@example.com", NEW_PASSWORD)).status_code == 303

    actions = await _audit_actions(console, tenant)
    for action in ("member.create", "member.invite", "member.invite_accept", "console.sign_in"):
        assert action in actions
    console.cookies.clear()
    await sign_in(console, tenant.emails["admin"])
    members = (await console.get("/console/members")).text
    assert "new.dev@example.com (invited)" not in members  # joined: no longer pending
    assert "new.dev@example.com</td>" not in members.partition("Pending invitations")[2]


async def test_a_used_link_cannot_be_used_twice_even_with_a_fresh_form(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["owner"])
    link = await _invite(console, "twice@example.com", "viewer")
    console.cookies.clear()
    form = await console.get(link)
    first = await console.post(link, data={"new_password": NEW_PASSWORD, "csrf_token": csrf_of(form.text)})
    assert first.status_code == 303
    second = await console.post(link, data={"new_password": "a second password!", "csrf_token": csrf_of(form.text)})
    assert second.status_code == 410
    console.cookies.clear()
    assert (await sign_in(console, "twice@example.com", "a second password!")).status_code == 401


async def test_an_expired_link_answers_an_error_and_changes_nothing(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    link = await _invite(console, "late@example.com")
    console.cookies.clear()
    form = await console.get(link)
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        past = datetime.now(UTC) - timedelta(seconds=1)
        await session.execute(
            update(MemberInvitation).values(expires_at=past).where(MemberInvitation.tenant_id == tenant.id)
        )
    expired = await console.post(link, data={"new_password": NEW_PASSWORD, "csrf_token": csrf_of(form.text)})
    assert expired.status_code == 410
    assert "expired" in expired.text
    assert "switchyard_console=" not in expired.headers.get("set-cookie", "")  # not signed in
    assert (await console.get(link)).status_code == 410
    assert (await sign_in(console, "late@example.com", NEW_PASSWORD)).status_code == 401
    console.cookies.clear()
    await sign_in(console, tenant.emails["admin"])
    members = (await console.get("/console/members")).text
    assert "expired" in members  # listed as pending, with re-invite on offer
    assert "Re-invite" in members


async def test_a_link_lasts_seven_days(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    before = datetime.now(UTC)
    await _invite(console, "week@example.com")
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        row = (
            await session.execute(
                MemberInvitation.__table__.select().where(  # type: ignore[attr-defined]
                    MemberInvitation.tenant_id == tenant.id,
                    MemberInvitation.invited_by == tenant.member_ids["admin"],  # not the first owner's, made with it
                )
            )
        ).one()
    assert timedelta(days=7) == INVITATION_LIFETIME
    assert before + INVITATION_LIFETIME <= row.expires_at <= datetime.now(UTC) + INVITATION_LIFETIME


async def test_re_invite_makes_a_new_link_and_the_old_one_stops_working(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    old = await _invite(console, "again@example.com")
    members = await console.get("/console/members")
    invitation_id = re.search(r"/console/members/invitations/(inv_\w+)/reinvite", members.text)
    assert invitation_id
    again = await console.post(
        f"/console/members/invitations/{invitation_id.group(1)}/reinvite", data={"csrf_token": csrf_of(members.text)}
    )
    assert again.status_code == 200, again.text
    new = LINK.search(again.text)
    assert new
    assert new.group(1) != old
    console.cookies.clear()
    assert (await console.get(old)).status_code == 404
    assert (await _accept(console, new.group(1))).status_code == 303
    assert "member.reinvite" in await _audit_actions(console, tenant)


async def test_revoke_withdraws_the_link_and_the_member_who_never_joined(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    link = await _invite(console, "never@example.com")
    members = await console.get("/console/members")
    invitation_id = re.search(r"/console/members/invitations/(inv_\w+)/revoke", members.text)
    assert invitation_id
    revoked = await console.post(
        f"/console/members/invitations/{invitation_id.group(1)}/revoke", data={"csrf_token": csrf_of(members.text)}
    )
    assert revoked.status_code == 303
    assert "never@example.com" not in (await console.get("/console/members")).text
    console.cookies.clear()
    assert (await console.get(link)).status_code == 404
    actions = await _audit_actions(console, tenant)
    assert "member.invite_revoke" in actions
    assert "member.delete" in actions


async def test_nobody_re_invites_or_revokes_an_invitation_above_their_role(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["owner"])
    link = await _invite(console, "boss@example.com", "owner")
    invitation_id = re.search(
        r"/console/members/invitations/(inv_\w+)/revoke", (await console.get("/console/members")).text
    )
    assert invitation_id
    console.cookies.clear()
    await sign_in(console, tenant.emails["admin"])
    page = await console.get("/console/members")
    assert "Revoke the invitation of boss@example.com" not in page.text  # nothing offered ...
    csrf = csrf_of(page.text)
    for action in ("reinvite", "revoke"):  # ... and the server refuses what is forged
        refused = await console.post(
            f"/console/members/invitations/{invitation_id.group(1)}/{action}", data={"csrf_token": csrf}
        )
        assert refused.status_code == 403
    console.cookies.clear()
    assert (await console.get(link)).status_code == 200  # still pending, its link unchanged


async def test_an_unknown_link_answers_an_error_page_without_a_session(console: Any) -> None:
    unknown = await console.get("/console/invitations/not-a-real-secret")
    assert unknown.status_code == 404
    assert "Invitation link not valid" in unknown.text
    assert "content-security-policy" in unknown.headers
    form = await console.get("/console/sign-in")  # a CSRF cookie and token, to get past the form check
    posted = await console.post(
        "/console/invitations/not-a-real-secret", data={"new_password": NEW_PASSWORD, "csrf_token": csrf_of(form.text)}
    )
    assert posted.status_code == 404
    assert "switchyard_console=" not in posted.headers.get("set-cookie", "")
    assert (await console.get("/console/invitations/" + "x" * 500)).status_code == 404


async def test_a_link_s_form_needs_its_csrf_cookie(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    link = await _invite(console, "csrf@example.com")
    console.cookies.clear()
    forged = await console.post(link, data={"new_password": NEW_PASSWORD, "csrf_token": "guessed"})
    assert forged.status_code == 403
    assert (await console.get(link)).status_code == 200  # unused
