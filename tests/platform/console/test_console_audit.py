"""The console's audit logs over HTTP: the tenant's (admins and above) and the operator's, newest first, filtered by
action, a page at a time, and never another tenant's rows."""

from __future__ import annotations

import re
from typing import Any

from switchyard.platform.audit.service import record, record_operator
from switchyard.platform.console.pages.audit import PAGE_SIZE
from switchyard.platform.db import UNSCOPED
from tests.platform.console.factories import TEST_ACTOR, page_csrf, sign_in
from tests.platform.console.test_console_operator import _add_operator, _operator_sign_in


def _rows(html: str) -> list[str]:
    """The event ids the page lists, in its order."""
    return re.findall(r'<tr id="((?:aud|oau)_\w+)">', html)


async def test_an_admin_reads_the_tenant_s_changes_newest_first_by_action_and_page(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    assert (await sign_in(console, tenant.emails["admin"])).status_code == 303
    csrf = await page_csrf(console, "/console/keys")
    made = await console.post("/console/keys", data={"name": "ci", "role": "viewer", "csrf_token": csrf})
    assert made.status_code == 200, made.text
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        for n in range(PAGE_SIZE + 3):  # more than a page
            record(
                session, tenant_id=tenant.id, actor=TEST_ACTOR, action="test.event", target_type="n", target_id=str(n)
            )
        record(session, tenant_id=other.id, actor=TEST_ACTOR, action="api_key.create", target_type="k", target_id="x")

    page = await console.get("/console/audit")
    assert page.status_code == 200, page.text
    assert 'aria-current="page">Audit log<' in page.text
    first = _rows(page.text)
    assert len(first) == PAGE_SIZE
    assert first == sorted(first, reverse=True)  # newest first
    older = re.search(r'href="(/console/audit\?after=\w+)">Older events<', page.text)
    assert older
    rest = _rows((await console.get(older.group(1))).text)
    assert rest
    assert not set(rest) & set(first)

    keys = await console.get("/console/audit?action=api_key.create")
    rows = _rows(keys.text)
    assert len(rows) == len(tenant.keys) + 1  # the tenant's own keys and the one made here
    assert "k <code>x</code>" not in keys.text  # never the other tenant's event of the same action
    by_admin = re.findall(rf"<code>{tenant.member_ids['admin']}</code>", keys.text)
    assert len(by_admin) == 1  # the key made by the admin, in the console
    none = await console.get("/console/audit?action=nothing.like.this")
    assert "No events with action <code>nothing.like.this</code>." in none.text


async def test_the_audit_log_is_for_admins_and_above(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    assert (await sign_in(console, tenant.emails["developer"])).status_code == 303
    assert (await console.get("/console/audit")).status_code == 403
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    assert (await console.get("/console/audit")).status_code == 200


async def test_an_operator_reads_the_operator_log_by_action(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _add_operator(console.app)
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        record_operator(session, actor=TEST_ACTOR, action="rate_card.create", target_type="rate_card", target_id="rc1")
    assert (await _operator_sign_in(console)).status_code == 303
    page = await console.get("/console/operator/audit")
    assert page.status_code == 200, page.text
    assert "<h1>Operator audit log</h1>" in page.text
    assert 'aria-current="page">Audit log<' in page.text
    assert "<code>operator_console.sign_in</code>" in page.text  # the sign-in just made
    cards = await console.get("/console/operator/audit?action=rate_card.create")
    assert len(_rows(cards.text)) == 1
    assert "rate_card <code>rc1</code>" in cards.text
    assert tenant.id not in cards.text
