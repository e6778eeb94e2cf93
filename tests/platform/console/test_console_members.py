"""Console members and passwords over HTTP: role rules answered by the server, invitations, password changes
(invitation links in detail: ``test_console_invitations``)."""

from __future__ import annotations

import re
from typing import Any

from tests.platform.console.factories import PASSWORD, csrf_of, page_csrf, sign_in


async def test_an_invited_member_joins_through_the_link_and_changes_the_password(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/members")
    invited = await console.post(
        "/console/members", data={"email": "New.Dev@Example.com", "role": "developer", "csrf_token": csrf}
    )
    assert invited.status_code == 200, invited.text
    link = re.search(
        r'id="invite-link" readonly value="https://switchyard\.test(/console/invitations/[^"]+)"', invited.text
    )
    assert link
    assert link.group(1) not in (await console.get("/console/members")).text  # shown once
    console.cookies.clear()
    form = await console.get(link.group(1))
    chosen = "my own first password"
    joined = await console.post(link.group(1), data={"new_password": chosen, "csrf_token": csrf_of(form.text)})
    assert joined.status_code == 303, joined.text
    overview = await console.get("/console/")
    assert "new.dev@example.com · developer" in overview.text
    csrf = await page_csrf(console, "/console/password")
    wrong = {"current_password": "not it at all", "new_password": "a brand new secret", "csrf_token": csrf}
    assert (await console.post("/console/password", data=wrong)).status_code == 400
    short = {"current_password": chosen, "new_password": "short", "csrf_token": csrf}
    assert (await console.post("/console/password", data=short)).status_code == 400
    right = {"current_password": chosen, "new_password": "a brand new secret", "csrf_token": csrf}
    assert (await console.post("/console/password", data=right)).status_code == 200
    console.cookies.clear()
    assert (await sign_in(console, "new.dev@example.com", chosen)).status_code == 401
    console.cookies.clear()
    assert (await sign_in(console, "new.dev@example.com", "a brand new secret")).status_code == 303


async def test_role_rules_are_the_server_s(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/members")
    owner_id = tenant.member_ids["owner"]
    invite_owner = {"email": "x@y.example", "role": "owner", "csrf_token": csrf}
    as_owner = await console.post("/console/members", data=invite_owner)
    assert as_owner.status_code == 403  # nobody grants a role above their own
    demote = await console.post(f"/console/members/{owner_id}/role", data={"role": "viewer", "csrf_token": csrf})
    assert demote.status_code == 403  # nor manages a member above them
    remove = await console.post(f"/console/members/{owner_id}/remove", data={"csrf_token": csrf})
    assert remove.status_code == 403
    promote = await console.post(
        f"/console/members/{tenant.member_ids['viewer']}/role", data={"role": "owner", "csrf_token": csrf}
    )
    assert promote.status_code == 403
    console.cookies.clear()
    await sign_in(console, tenant.emails["owner"])
    csrf = await page_csrf(console, "/console/members")
    for role in ("admin", "developer", "viewer"):
        removed = await console.post(f"/console/members/{tenant.member_ids[role]}/remove", data={"csrf_token": csrf})
        assert removed.status_code == 303
    listed = (await console.get("/v1/members", headers=tenant.headers())).json()["data"]
    for other in [m for m in listed if m["role"] == "owner" and m["id"] != owner_id]:  # the tenant's first owner
        to_viewer = {"role": "viewer", "csrf_token": csrf}
        demoted = await console.post(f"/console/members/{other['id']}/role", data=to_viewer)
        assert demoted.status_code == 303
    last = await console.post(f"/console/members/{owner_id}/role", data={"role": "admin", "csrf_token": csrf})
    assert last.status_code == 409  # a tenant keeps an owner
    members = (await console.get("/console/members")).text
    assert tenant.emails["viewer"] not in members


async def test_a_viewer_sees_members_but_no_forms(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["viewer"])
    page = await console.get("/console/members")
    assert page.status_code == 200
    assert tenant.emails["owner"] in page.text
    assert "Invite" not in page.text
    assert "Change role" not in page.text
    assert PASSWORD not in page.text
