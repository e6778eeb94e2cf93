"""The console's audit logs over HTTP: the tenant's (admins and above) and the operator's, newest first, actors by
name, targets linked, filtered by action, actor and UTC days, a page at a time, exported as CSV safe to open in a
spreadsheet, and never another tenant's rows."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from html import unescape
from typing import Any

import pytest

from switchyard.platform.audit.service import record, record_operator
from switchyard.platform.auth.principal import Actor
from switchyard.platform.bootstrap import CLI_ACTOR
from switchyard.platform.console.pages import audit as audit_page
from switchyard.platform.console.pages.audit import PAGE_SIZE
from switchyard.platform.db import UNSCOPED
from tests.platform.conftest import bearer
from tests.platform.console.factories import TEST_ACTOR, page_csrf, sign_in
from tests.platform.console.test_console_operator import OPERATOR_EMAIL, _add_operator, _operator_sign_in

EVIL_NAME = '=HYPERLINK("https://evil.example","x")'


def _rows(html: str) -> list[str]:
    """The event ids the page lists, in its order."""
    return re.findall(r'<tr id="((?:aud|oau)_\w+)">', html)


def _row(html: str, event_id: str) -> str:
    found = re.search(rf'<tr id="{event_id}">.*?</tr>', html, re.S)
    assert found, f"no row {event_id}"
    return found.group(0)


def _options(html: str, select_id: str) -> dict[str, str]:
    """A select's options: value → text."""
    found = re.search(rf'<select id="{select_id}".*?</select>', html, re.S)
    assert found, select_id
    return {unescape(v): unescape(t).strip() for v, t in re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)<', found[0])}


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


async def _record(app: Any, tenant_id: str, **fields: Any) -> str:
    fields = {"actor": TEST_ACTOR, "action": "test.event", "target_type": "n", "target_id": "1", **fields}
    when = fields.pop("when", None)
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        event = record(session, tenant_id=tenant_id, **fields)
        if when is not None:
            event.created_at = when
    return event.id


async def test_an_admin_reads_the_tenant_s_changes_newest_first_a_page_at_a_time(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    assert (await sign_in(console, tenant.emails["admin"])).status_code == 303
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        for n in range(PAGE_SIZE + 3):  # more than a page
            record(
                session, tenant_id=tenant.id, actor=TEST_ACTOR, action="test.event", target_type="n", target_id=str(n)
            )
        record(session, tenant_id=other.id, actor=TEST_ACTOR, action="other.event", target_type="k", target_id="x")

    page = await console.get("/console/audit")
    assert page.status_code == 200, page.text
    assert 'aria-current="page">Audit log<' in page.text
    assert '<a class="brand" href="/console/">' in page.text  # a member's brand: the tenant's overview
    first = _rows(page.text)
    assert len(first) == PAGE_SIZE
    assert first == sorted(first, reverse=True)  # newest first
    filtered = await console.get("/console/audit?action=test.event")
    older = re.search(r'href="(/console/audit\?action=test.event&amp;after=\w+)">Older events<', filtered.text)
    assert older, "the next page keeps the filter"
    rest = _rows((await console.get(unescape(older.group(1)))).text)
    assert len(rest) == 3
    assert not set(rest) & set(_rows(filtered.text))
    assert "other.event" not in page.text  # never the other tenant's event, nor its action among the choices
    assert "other.event" not in _options(page.text, "audit-action")


async def test_actors_are_named_and_targets_link_to_their_pages(console: Any, make_console_tenant: Any) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    operator_id = await _add_operator(console.app)
    assert (await sign_in(console, tenant.emails["admin"])).status_code == 303
    csrf = await page_csrf(console, "/console/keys")
    made = await console.post("/console/keys", data={"name": "ci", "role": "viewer", "csrf_token": csrf})
    assert made.status_code == 200, made.text
    by_key = await console.post("/v1/api-keys", json={"name": "deploy bot", "role": "viewer"}, headers=tenant.headers())
    assert by_key.status_code == 201, by_key.text
    cli = await _record(console.app, tenant.id, actor=CLI_ACTOR, action="test.by_cli")
    by_operator = await _record(
        console.app, tenant.id, actor=Actor(key_id=operator_id, request_id=None), action="test.by_op"
    )
    stranger = await _record(  # an id of another tenant's member is not named here
        console.app, tenant.id, actor=Actor(key_id=other.member_ids["owner"], request_id=None)
    )
    agent = await _record(console.app, tenant.id, action="agent.update", target_type="agent", target_id="agent_1")
    deleted = await _record(console.app, tenant.id, action="agent.delete", target_type="agent", target_id="agent_2")

    page = (await console.get("/console/audit")).text
    keys = re.findall(r'<tr id="(aud_\w+)">\s*<td>[^<]*</td><td><code>api_key.create</code>', page)
    made_by_key, made_here = (_row(page, k) for k in keys[:2])  # newest first
    assert f'{tenant.emails["admin"]} <span class="hint">member</span>' in made_here
    assert '<a href="/console/keys"><code>key_' in made_here
    assert re.search(r"owner \(sy_\w+_…\) <span class=\"hint\">api key</span>", made_by_key)
    assert 'CLI <span class="hint">CLI</span>' in _row(page, cli)
    assert f'{OPERATOR_EMAIL} <span class="hint">operator</span>' in _row(page, by_operator)
    assert other.emails["owner"] not in page
    assert f"A removed member ({other.member_ids['owner']})" in _row(page, stranger)
    assert '<a href="/console/agents/agent_1"><code>agent_1</code></a>' in _row(page, agent)
    assert "<a " not in _row(page, deleted)  # a deleted agent has no page to link to
    actors = _options(page, "audit-actor")
    assert actors[tenant.member_ids["admin"]] == f"{tenant.emails['admin']} (member)"
    assert actors["cli"] == "CLI (CLI)"


async def test_the_log_is_filtered_by_an_action_from_the_list_an_actor_and_utc_days(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    day = lambda d, h=12: datetime(2026, 3, d, h, tzinfo=UTC)  # noqa: E731
    before = await _record(console.app, tenant.id, action="test.dated", when=day(1, 23))
    first = await _record(console.app, tenant.id, action="test.dated", when=day(2, 0))
    last = await _record(console.app, tenant.id, action="test.dated", when=day(3, 23))
    after = await _record(console.app, tenant.id, action="test.dated", when=day(4, 0))
    by_cli = await _record(console.app, tenant.id, actor=CLI_ACTOR, action="test.dated", when=day(2))

    page = (await console.get("/console/audit")).text
    actions = _options(page, "audit-action")
    assert {"", "tenant.create", "api_key.create", "test.dated"} <= set(actions)  # the actions this log holds
    assert actions[""] == "Any action"

    dated = await console.get("/console/audit?action=test.dated&since=2026-03-02&until=2026-03-03")
    assert set(_rows(dated.text)) == {first, last, by_cli}  # both days whole, in UTC
    assert before not in dated.text
    assert after not in dated.text
    assert '<option value="test.dated" selected>' in dated.text
    assert 'value="2026-03-02"' in dated.text  # the form shows the filter
    cli_only = await console.get("/console/audit?actor=cli&since=&until=")
    assert _rows(cli_only.text) == [by_cli]
    none = await console.get("/console/audit?action=nothing.like.this")
    assert "No events match this filter." in none.text
    bad = await console.get("/console/audit?since=yesterday")
    assert bad.status_code == 400
    assert "since must be a day like 2026-12-06" in bad.text


async def test_the_csv_export_has_the_filtered_rows_and_is_safe_in_a_spreadsheet(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    evil = await console.post("/v1/api-keys", json={"name": EVIL_NAME, "role": "admin"}, headers=tenant.headers())
    assert evil.status_code == 201, evil.text
    made = await console.post(
        "/v1/api-keys", json={"name": "-2+3", "role": "viewer"}, headers=bearer(evil.json()["value"])
    )
    assert made.status_code == 201, made.text
    await _record(console.app, tenant.id, target_id="@SUM(A1)", details={"reason": "=1+1"})
    await _record(console.app, other.id, action="api_key.create")
    assert (await sign_in(console, tenant.emails["admin"])).status_code == 303

    page = (await console.get("/console/audit?action=api_key.create")).text
    link = re.search(r'<a class="button" id="audit-export" href="([^"]+)" download hx-boost="false">', page)
    assert link
    assert unescape(link.group(1)) == "/console/audit/export.csv?action=api_key.create"
    exported = await console.get(unescape(link.group(1)))
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("text/csv")
    assert exported.headers["content-disposition"].startswith('attachment; filename="audit-log-')
    assert exported.headers["x-switchyard-export-truncated"] == "false"
    rows = _csv(exported.text)
    assert {r["action"] for r in rows} == {"api_key.create"}
    assert len(rows) == len(tenant.keys) + 2  # the tenant's own keys and the two made here: never the other's
    by_evil = [r for r in rows if r["target_id"] == made.json()["id"]]
    assert by_evil[0]["actor"] == f"'{EVIL_NAME} (sy_{evil.json()['value'].split('_')[1]}_…)"  # shown as text
    assert by_evil[0]["actor_kind"] == "api key"
    assert by_evil[0]["details"].startswith("{")
    assert '"name": "-2+3"' in by_evil[0]["details"]  # inside JSON, so not at a cell's start

    everything = _csv((await console.get("/console/audit/export.csv?action=test.event")).text)
    assert everything[0]["target_id"] == "'@SUM(A1)"
    assert everything[0]["details"] == '{"reason": "=1+1"}'  # starts with "{": no formula
    for row in _csv((await console.get("/console/audit/export.csv")).text):
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row.values()), row

    monkeypatch.setattr(audit_page, "EXPORT_MAX_ROWS", 2)
    bounded = await console.get("/console/audit/export.csv")
    assert len(_csv(bounded.text)) == 2
    assert bounded.headers["x-switchyard-export-truncated"] == "true"


async def test_the_audit_log_and_its_export_are_for_admins_and_above(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    for role in ("viewer", "developer"):
        console.cookies.clear()
        assert (await sign_in(console, tenant.emails[role])).status_code == 303
        assert (await console.get("/console/audit")).status_code == 403
        assert (await console.get("/console/audit/export.csv")).status_code == 403
        assert ">Audit log<" not in (await console.get("/console/")).text
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    assert (await console.get("/console/audit")).status_code == 200
    assert (await console.get("/console/audit/export.csv")).status_code == 200
    console.cookies.clear()
    assert (await console.get("/console/audit/export.csv")).status_code == 302  # signed out: to the sign-in


async def test_an_operator_reads_filters_and_exports_the_operator_log(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    operator_id = await _add_operator(console.app)
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        record_operator(session, actor=TEST_ACTOR, action="rate_card.create", target_type="rate_card", target_id="rc1")
    assert (await _operator_sign_in(console)).status_code == 303
    page = await console.get("/console/operator/audit")
    assert page.status_code == 200, page.text
    assert "<h1>Operator audit log</h1>" in page.text
    assert 'aria-current="page">Audit log<' in page.text
    signed_in = re.search(r'<tr id="(oau_\w+)">\s*<td>[^<]*</td><td><code>operator_console.sign_in</code>', page.text)
    assert signed_in
    assert f'{OPERATOR_EMAIL} <span class="hint">operator</span>' in _row(page.text, signed_in.group(1))
    created = re.search(r'<tr id="(oau_\w+)">\s*<td>[^<]*</td><td><code>tenant.create</code>', page.text)
    assert created  # by the tests' operator key, which is named
    assert re.search(r"\(sy_op\w+_…\) <span class=\"hint\">operator key</span>", _row(page.text, created.group(1)))
    assert "operator_console.sign_in" in _options(page.text, "audit-action")
    assert _options(page.text, "audit-actor")[operator_id] == f"{OPERATOR_EMAIL} (operator)"

    cards = await console.get("/console/operator/audit?action=rate_card.create")
    assert len(_rows(cards.text)) == 1
    assert 'rate_card <a href="/console/operator/rate-cards"><code>rc1</code></a>' in cards.text
    assert tenant.id not in cards.text
    mine = await console.get(f"/console/operator/audit?actor={operator_id}")
    assert {a for a in re.findall(r"<td><code>([\w.]+)</code></td>\s*<td class=\"actor\"", mine.text)} == {
        "operator_console.sign_in"
    }
    exported = await console.get("/console/operator/audit/export.csv?action=rate_card.create")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"].startswith('attachment; filename="operator-audit-log-')
    assert [(r["action"], r["target_id"]) for r in _csv(exported.text)] == [("rate_card.create", "rc1")]


async def test_a_member_session_reads_no_operator_log(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    for path in ("/console/operator/audit", "/console/operator/audit/export.csv"):
        refused = await console.get(path)
        assert refused.status_code == 302, path
        assert refused.headers["location"].startswith("/console/operator/sign-in")
