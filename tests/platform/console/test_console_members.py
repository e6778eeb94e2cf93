"""Console members and passwords over HTTP: role rules answered by the server, invitations, password changes
(invitation links in detail: ``test_console_invitations``)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import MemberPasswordReset, utc_now
from tests.platform.console.factories import PASSWORD, csrf_of, page_csrf, sign_in
from tests.support.smtp import smtp_server


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


MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NAV_LINK = re.compile(r'<nav aria-label="Console">.*?</nav>', re.S)


async def test_removing_the_last_owner_stays_on_the_members_page_with_the_reason(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["owner"])
    csrf = await page_csrf(console, "/console/members")
    owner_id = tenant.member_ids["owner"]
    listed = (await console.get("/v1/members", headers=tenant.headers())).json()["data"]
    (first,) = [m for m in listed if m["role"] == "owner" and m["id"] != owner_id]  # the tenant's first owner
    removed = await console.post(f"/console/members/{first['id']}/remove", data={"csrf_token": csrf})
    assert removed.status_code == 303
    shown = await console.get(removed.headers["location"])
    assert f"{first['email']} is removed." in shown.text  # a flash, shown once ...
    assert "is removed." not in (await console.get("/console/members")).text  # ... and not again

    last = await console.post(f"/console/members/{owner_id}/remove", data={"csrf_token": csrf})
    assert last.status_code == 409
    assert "<h1>Members</h1>" in last.text  # the Members page, not a bare error page
    assert "A tenant must keep at least one owner." in last.text
    demote = await console.post(f"/console/members/{owner_id}/role", data={"role": "admin", "csrf_token": csrf})
    assert demote.status_code == 409
    assert "A tenant must keep at least one owner." in demote.text
    after = (await console.get("/v1/members", headers=tenant.headers())).json()["data"]
    assert [m["role"] for m in after if m["id"] == owner_id] == ["owner"]  # nothing changed

    to_viewer = await console.post(
        f"/console/members/{tenant.member_ids['admin']}/role", data={"role": "viewer", "csrf_token": csrf}
    )
    assert "is now a viewer." in (await console.get(to_viewer.headers["location"])).text


async def test_the_navigation_shows_each_role_only_the_pages_it_may_open(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    shown: dict[str, list[str]] = {}
    for role in ("viewer", "developer", "admin", "owner"):
        console.cookies.clear()
        await sign_in(console, tenant.emails[role])
        page = await console.get("/console/")
        nav = NAV_LINK.search(page.text)
        assert nav, page.text
        shown[role] = re.findall(r'href="(/console[^"]*)"', nav.group(0))
        for href in shown[role]:
            assert (await console.get(href)).status_code == 200, (role, href)  # no link to a 403
    assert "/console/keys" not in shown["viewer"]
    assert "/console/playground" not in shown["viewer"]
    assert "/console/playground" in shown["developer"]
    assert "/console/audit" not in shown["developer"]
    for page in ("/console/keys", "/console/billing", "/console/audit"):
        assert page in shown["admin"]
        assert (await console.get(page)).status_code == 200
    assert len(shown["viewer"]) < len(shown["developer"]) < len(shown["admin"]) == len(shown["owner"])


async def test_every_page_links_the_svg_favicon(console: Any, make_console_tenant: Any) -> None:
    sign_in_page = await console.get("/console/sign-in")
    assert '<link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml">' in sign_in_page.text
    icon = await console.get("/console/static/favicon.svg")
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")


async def test_revoking_a_key_asks_first_and_says_when_it_is_an_owner_key(
    console: Any, make_console_tenant: Any, make_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    keys = (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"]
    owner_key = next(k for k in keys if k["name"] == "owner")
    viewer_key = next(k for k in keys if k["role"] == "viewer")
    await sign_in(console, tenant.emails["admin"])
    listing = await console.get("/console/keys")
    assert f'href="/console/keys/{viewer_key["id"]}/revoke"' in listing.text  # a link to a page, not a form
    assert f'action="/console/keys/{viewer_key["id"]}/revoke"' not in listing.text
    asked = await console.get(f"/console/keys/{viewer_key['id']}/revoke")
    assert asked.status_code == 200
    assert "Revoke key" in asked.text
    assert "owner-key-warning" not in asked.text
    assert (await console.get("/v1/models", headers=tenant.headers("viewer"))).status_code == 200  # not yet
    assert (await console.get(f"/console/keys/{owner_key['id']}/revoke")).status_code == 403  # above an admin

    console.cookies.clear()
    await sign_in(console, tenant.emails["owner"])
    warned = await console.get(f"/console/keys/{owner_key['id']}/revoke")
    assert warned.status_code == 200
    assert 'id="owner-key-warning"' in warned.text
    assert "the one made with the tenant" in warned.text
    other = await make_tenant()
    other_keys = (await console.get("/v1/api-keys", headers=other.headers())).json()["data"]
    assert (await console.get(f"/console/keys/{other_keys[0]['id']}/revoke")).status_code == 404  # not theirs

    revoked = await console.post(f"/console/keys/{viewer_key['id']}/revoke", data={"csrf_token": csrf_of(warned.text)})
    assert revoked.status_code == 303
    assert (await console.get("/v1/models", headers=tenant.headers("viewer"))).status_code == 401
    page = await console.get(revoked.headers["location"])
    assert "is revoked." in page.text
    assert "is revoked." not in (await console.get("/console/keys")).text  # the flash is shown once


async def test_a_viewer_or_developer_cannot_open_or_use_the_revoke_confirmation(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    keys = (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"]
    viewer_key = next(k for k in keys if k["role"] == "viewer")
    for role in ("viewer", "developer"):
        console.cookies.clear()
        await sign_in(console, tenant.emails[role])
        csrf = await page_csrf(console, "/console/")
        assert (await console.get(f"/console/keys/{viewer_key['id']}/revoke")).status_code == 403
        refused = await console.post(f"/console/keys/{viewer_key['id']}/revoke", data={"csrf_token": csrf})
        assert refused.status_code == 403
    assert (await console.get("/v1/models", headers=tenant.headers("viewer"))).status_code == 200


async def test_the_keys_page_shows_each_key_s_usage_this_month_as_the_usage_api_counts_it(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Count to three."}], "max_tokens": 16}
    for _ in range(2):
        answer = await console.post("/v1/chat/completions", json=body, headers=tenant.headers("developer"))
        assert answer.status_code == 200, answer.text
    usage = await console.get("/v1/usage", params={"group_by": "api_key_id", "limit": 31}, headers=tenant.headers())
    assert usage.status_code == 200, usage.text
    rows = [row for bucket in usage.json()["data"] for row in bucket["results"]]
    keys = (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"]
    developer_key = next(k for k in keys if k["role"] == "developer")
    mine = [row for row in rows if row["api_key_id"] == developer_key["id"]]
    tokens = sum(row["input_tokens"] + row["output_tokens"] for row in mine)
    chip_us = sum(row["chip_us"] for row in mine)
    assert tokens > 0
    assert chip_us > 0

    await sign_in(console, tenant.emails["admin"])
    page = (await console.get("/console/keys")).text
    row = re.search(rf'<tr id="{developer_key["id"]}">(.*?)</tr>', page, re.S)
    assert row, page
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert cells == [f"{tokens:,}", f"{chip_us:,}"]
    viewer_key = next(k for k in keys if k["role"] == "viewer")
    idle = re.search(rf'<tr id="{viewer_key["id"]}">(.*?)</tr>', page, re.S)
    assert idle
    assert re.findall(r'<td class="num">([^<]*)</td>', idle.group(1)) == ["0", "0"]
    assert '<code class="key-prefix">' in page  # the prefix never wraps (console.css)


RESET_LINK = re.compile(r'id="reset-link" readonly value="https://switchyard\.test(/console/password-reset/[^"]+)"')


async def test_an_admin_issues_a_one_time_reset_link_and_the_member_chooses_a_new_password(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    developer = tenant.member_ids["developer"]
    await sign_in(console, tenant.emails["developer"])
    old_session = dict(console.cookies)
    console.cookies.clear()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/members")
    issued = await console.post(f"/console/members/{developer}/password-reset", data={"csrf_token": csrf})
    assert issued.status_code == 200, issued.text
    found = RESET_LINK.search(issued.text)
    assert found, issued.text
    link = found.group(1)
    assert link not in (await console.get("/console/members")).text  # shown once
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        stored = (await session.execute(select(MemberPasswordReset.token_sha256))).scalars().all()
    assert hashlib.sha256(link.rsplit("/", 1)[1].encode()).hexdigest() in stored  # only the hash is kept

    console.cookies.clear()
    form = await console.get(link)
    assert form.status_code == 200
    assert tenant.emails["developer"] in form.text
    short = await console.post(link, data={"new_password": "short", "csrf_token": csrf_of(form.text)})
    assert short.status_code == 400  # the password rules; the link stays unused
    chosen = "a new password after forgetting"
    used = await console.post(link, data={"new_password": chosen, "csrf_token": csrf_of(form.text)})
    assert used.status_code == 303
    assert f"{tenant.emails['developer']} · developer" in (await console.get("/console/")).text  # signed in
    console.cookies.clear()
    again = await console.get(link)
    assert again.status_code == 410  # once
    assert "used already" in again.text
    assert (await sign_in(console, tenant.emails["developer"], PASSWORD)).status_code == 401  # the old one is gone
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["developer"], chosen)).status_code == 303
    console.cookies.clear()
    console.cookies.update(old_session)
    assert (await console.get("/console/")).status_code == 302  # the session from before the reset has ended


async def test_reset_links_follow_the_role_rules_and_stay_in_their_tenant(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    other = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/members")
    above = await console.post(
        f"/console/members/{tenant.member_ids['owner']}/password-reset", data={"csrf_token": csrf}
    )
    assert above.status_code == 403  # an admin does not reset an owner's password
    elsewhere = await console.post(
        f"/console/members/{other.member_ids['viewer']}/password-reset", data={"csrf_token": csrf}
    )
    assert elsewhere.status_code == 404  # another tenant's member is not found
    console.cookies.clear()
    await sign_in(console, tenant.emails["developer"])
    csrf = await page_csrf(console, "/console/members")
    refused = await console.post(
        f"/console/members/{tenant.member_ids['viewer']}/password-reset", data={"csrf_token": csrf}
    )
    assert refused.status_code == 403  # below admin: no resets
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(select(MemberPasswordReset))).first() is None  # nothing was issued
    console.cookies.clear()
    assert (await console.get("/console/password-reset/not-a-link")).status_code == 404


async def test_with_smtp_the_reset_and_invitation_links_are_mailed_instead_of_shown(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_console_tenant()
    with smtp_server() as mail:
        monkeypatch.setattr(console.app.state.settings, "smtp_url", SecretStr(mail.url))
        await sign_in(console, tenant.emails["admin"])
        csrf = await page_csrf(console, "/console/members")
        reset = await console.post(
            f"/console/members/{tenant.member_ids['viewer']}/password-reset", data={"csrf_token": csrf}
        )
        assert reset.status_code == 200
        assert f"The link is e-mailed to {tenant.emails['viewer']}." in reset.text
        assert "/console/password-reset/" not in reset.text  # mailed, not shown
        invited = await console.post(
            "/console/members", data={"email": "mailed@example.com", "role": "viewer", "csrf_token": csrf}
        )
        assert invited.status_code == 200
        assert "The link is e-mailed to mailed@example.com." in invited.text
        assert "/console/invitations/" not in invited.text
    reset_mail, invitation_mail = mail.messages
    assert reset_mail.recipients == [tenant.emails["viewer"]]
    assert reset_mail.message["From"] == console.app.state.settings.mail_from
    reset_path = re.search(r"https://switchyard\.test(/console/password-reset/\S+)", reset_mail.body)
    assert reset_path, reset_mail.body
    assert invitation_mail.recipients == ["mailed@example.com"]
    invite_path = re.search(r"https://switchyard\.test(/console/invitations/\S+)", invitation_mail.body)
    assert invite_path, invitation_mail.body

    console.cookies.clear()
    form = await console.get(reset_path.group(1))
    chosen = "the password from the mail"
    used = await console.post(reset_path.group(1), data={"new_password": chosen, "csrf_token": csrf_of(form.text)})
    assert used.status_code == 303
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["viewer"], chosen)).status_code == 303
    console.cookies.clear()
    assert (await console.get(invite_path.group(1))).status_code == 200  # the mailed invitation works too


async def test_a_key_made_in_the_console_expires_when_chosen_and_nothing_else_is_accepted(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/keys")
    before = {k["id"] for k in (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"]}
    refused = await console.post(
        "/console/keys", data={"name": "odd", "role": "viewer", "expires_in_days": "5", "csrf_token": csrf}
    )
    assert refused.status_code == 400
    assert "Choose when the key expires." in refused.text
    made = await console.post(
        "/console/keys", data={"name": "month", "role": "viewer", "expires_in_days": "30", "csrf_token": csrf}
    )
    assert made.status_code == 200, made.text
    keys = (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"]
    [new] = [k for k in keys if k["id"] not in before]
    assert new["name"] == "month"
    expires = datetime.fromisoformat(new["expires_at"].replace("Z", "+00:00"))
    assert timedelta(days=29, hours=23) < expires - utc_now() <= timedelta(days=30)
