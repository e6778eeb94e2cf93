"""The operator's console over HTTP: sign-in (CSRF, limits, audit), sessions kept apart from members' and from the
API, credits granted through the billing service, rate cards, and the fleet fragment's numbers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from switchyard.platform.cli import main
from switchyard.platform.console.edge import SESSION_COOKIE
from switchyard.platform.console.operator.edge import OPERATOR_SESSION_COOKIE
from switchyard.platform.db import UNSCOPED
from switchyard.platform.identity.attempts import FAILURES_PER_ACCOUNT_AND_CLIENT
from switchyard.platform.identity.operator_accounts import create_operator_account
from switchyard.platform.models import AuditEvent, OperatorAccount, OperatorAuditEvent, OperatorConsoleSession
from tests.platform.conftest import bearer
from tests.platform.console.factories import PASSWORD, TEST_ACTOR, csrf_of, sign_in
from tests.platform.inference.test_fleet_process import fleet_settings  # noqa: F401  (a fixture)

OPERATOR_EMAIL = "ops@switchyard.example"


async def _add_operator(app: Any, email: str = OPERATOR_EMAIL) -> str:
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        account, _ = await create_operator_account(session, actor=TEST_ACTOR, email=email, password=PASSWORD)
    return account.id


async def _operator_sign_in(client: Any, email: str = OPERATOR_EMAIL, password: str = PASSWORD) -> Any:
    form = await client.get("/console/operator/sign-in")
    assert form.status_code == 200, form.text
    return await client.post(
        "/console/operator/sign-in", data={"email": email, "password": password, "csrf_token": csrf_of(form.text)}
    )


async def _operator_events(app: Any, action: str) -> list[OperatorAuditEvent]:
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(select(OperatorAuditEvent).where(OperatorAuditEvent.action == action))
        return list(rows.scalars())


async def test_an_operator_signs_in_and_gets_a_cookie_of_its_own(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    operator_id = await _add_operator(console.app)
    anonymous = await console.get("/console/operator/fleet")
    assert anonymous.status_code == 302
    assert anonymous.headers["location"] == "/console/operator/sign-in?next=/console/operator/fleet"
    answer = await _operator_sign_in(console, OPERATOR_EMAIL.upper())
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/operator/"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{OPERATOR_SESSION_COOKIE}=")
    for flag in ("HttpOnly", "Secure", "SameSite=lax", "Path=/console/operator"):
        assert flag in cookie
    assert SESSION_COOKIE not in answer.cookies  # no member session comes with it
    tenants = await console.get("/console/operator/")
    assert tenants.status_code == 200
    assert "default-src 'self'" in tenants.headers["content-security-policy"]
    assert f"{OPERATOR_EMAIL} · operator" in tenants.text
    row = re.search(rf"<tr><td><a href=\"/console/operator/tenants/{tenant.id}\">.*?</tr>", tenants.text, re.S)
    assert row, tenants.text
    assert '<td class="num">5</td>' in row.group(0)  # the first owner and one member per role
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        stored = (await session.execute(select(OperatorConsoleSession))).scalars().all()
        account = await session.get(OperatorAccount, operator_id)
    assert [s.operator_id for s in stored] == [operator_id]
    assert stored[0].token_sha256 != answer.cookies[OPERATOR_SESSION_COOKIE]  # only its SHA-256 is kept
    assert account is not None
    assert account.password_hash.startswith("$argon2id$")
    signed_in = await _operator_events(console.app, "operator_console.sign_in")
    assert [e.actor for e in signed_in] == [operator_id]


async def test_sign_in_and_every_operator_form_need_their_csrf_token(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _add_operator(console.app)
    await console.get("/console/operator/sign-in")
    form = {"email": OPERATOR_EMAIL, "password": PASSWORD}
    assert (await console.post("/console/operator/sign-in", data=form)).status_code == 403
    assert (await _operator_sign_in(console)).status_code == 303
    grant = {"amount": "5", "currency": "USD", "reason": "goodwill"}
    path = f"/console/operator/tenants/{tenant.id}/credits"
    assert (await console.post(path, data=grant)).status_code == 403
    token = csrf_of((await console.get(f"/console/operator/tenants/{tenant.id}")).text)
    assert (await console.post(path, data={**grant, "csrf_token": token[:-2] + "xx"})).status_code == 403
    foreign = await console.post(path, data={**grant, "csrf_token": token}, headers={"origin": "https://evil.example"})
    assert foreign.status_code == 403
    assert (await console.post("/console/operator/sign-out")).status_code == 403
    assert (await console.post(path, data={**grant, "csrf_token": token})).status_code == 303


async def test_failed_operator_sign_ins_are_refused_audited_and_rate_limited(console: Any) -> None:
    operator_id = await _add_operator(console.app)
    wrong = await _operator_sign_in(console, password="not the password at all")
    assert wrong.status_code == 401
    assert "Wrong email or password" in wrong.text
    assert OPERATOR_SESSION_COOKIE not in wrong.cookies
    assert (await _operator_sign_in(console, "nobody@nowhere.example")).status_code == 401  # the same answer
    failed = await _operator_events(console.app, "operator_console.sign_in_failed")
    assert {(e.target_id, e.details["email"]) for e in failed} == {
        (operator_id, OPERATOR_EMAIL),
        ("", "nobody@nowhere.example"),
    }
    for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT - 1):
        assert (await _operator_sign_in(console, password="guess guess guess")).status_code == 401
    locked = await _operator_sign_in(console)  # even the right password, until the window passes
    assert locked.status_code == 429
    assert int(locked.headers["retry-after"]) > 0
    assert OPERATOR_SESSION_COOKIE not in locked.cookies
    assert await _operator_events(console.app, "operator_console.sign_in_limited")


async def test_a_member_session_never_reaches_operator_pages(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    assert (await console.get("/console/")).status_code == 200
    for path in ("/console/operator/", "/console/operator/fleet", f"/console/operator/tenants/{tenant.id}"):
        refused = await console.get(path)
        assert refused.status_code == 302, path
        assert refused.headers["location"].startswith("/console/operator/sign-in?next=")
    member_csrf = csrf_of((await console.get("/console/")).text)
    grant = await console.post(
        f"/console/operator/tenants/{tenant.id}/credits",
        data={"amount": "5", "currency": "USD", "reason": "self-service", "csrf_token": member_csrf},
    )
    assert grant.status_code == 302
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(select(AuditEvent).where(AuditEvent.action == "credit.grant"))).first() is None
    # nor does the member's password open the operator sign-in
    assert (await _operator_sign_in(console, tenant.emails["owner"])).status_code == 401


async def test_an_operator_session_is_no_tenant_session_and_no_api_credential(
    console: Any, make_console_tenant: Any
) -> None:
    await make_console_tenant()
    await _add_operator(console.app)
    secret = (await _operator_sign_in(console)).cookies[OPERATOR_SESSION_COOKIE]
    console.cookies.clear()
    console.cookies.set(SESSION_COOKIE, secret, domain="switchyard.test", path="/console")  # as a member cookie
    tenant_page = await console.get("/console/")
    assert tenant_page.status_code == 302
    assert tenant_page.headers["location"].startswith("/console/sign-in")
    console.cookies.clear()
    console.cookies.set(OPERATOR_SESSION_COOKIE, secret, domain="switchyard.test", path="/")  # sent everywhere
    assert (await console.get("/console/agents")).status_code == 302
    for headers in ({}, bearer(secret)):
        assert (await console.get("/v1/admin/tenants", headers=headers)).status_code == 401
        assert (await console.get("/v1/agents", headers=headers)).status_code == 401
    assert (await console.get("/console/operator/")).status_code == 200  # the positive control


async def test_sign_out_ends_the_operator_session(console: Any) -> None:
    await _add_operator(console.app)
    secret = (await _operator_sign_in(console)).cookies[OPERATOR_SESSION_COOKIE]
    token = csrf_of((await console.get("/console/operator/")).text)
    out = await console.post("/console/operator/sign-out", data={"csrf_token": token})
    assert out.status_code == 303
    assert out.headers["location"] == "/console/operator/sign-in?signed_out=1"
    console.cookies.set(OPERATOR_SESSION_COOKIE, secret, domain="switchyard.test", path="/console/operator")
    assert (await console.get("/console/operator/")).status_code == 302  # the replayed cookie is dead
    assert await _operator_events(console.app, "operator_console.sign_out")


async def test_an_operator_password_hashed_at_another_cost_is_hashed_again_on_sign_in(console: Any) -> None:
    from argon2 import PasswordHasher
    from sqlalchemy import update

    account_id = await _add_operator(console.app)
    older = PasswordHasher(time_cost=4, memory_cost=32_768, parallelism=2).hash(PASSWORD)  # yesterday's cost
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(OperatorAccount).where(OperatorAccount.id == account_id).values(password_hash=older)
        )
    assert (await _operator_sign_in(console)).status_code == 303  # the old hash still verifies
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        stored = (await session.get(OperatorAccount, account_id)).password_hash  # type: ignore[union-attr]
    assert stored != older
    assert "$m=32768,t=4,p=2$" not in stored  # hashed again, at the configured cost
    console.cookies.clear()
    assert (await _operator_sign_in(console)).status_code == 303


async def test_granting_a_credit_changes_the_balance_and_is_audited(
    console: Any, make_console_tenant: Any, operator_headers: dict[str, str]
) -> None:
    tenant = await make_console_tenant()
    operator_id = await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    assert page.status_code == 200
    assert re.search(r'id="credit-balance">\s*none', page.text)
    form = {"amount": "25.50", "currency": "USD", "reason": "Outage credit", "csrf_token": csrf_of(page.text)}
    granted = await console.post(f"/console/operator/tenants/{tenant.id}/credits", data=form)
    assert granted.status_code == 303, granted.text
    page = await console.get(granted.headers["location"])
    assert re.search(r'id="credit-balance">\s*25.50 USD', page.text), page.text
    assert "Outage credit" in page.text
    listed = await console.get("/console/operator/")
    assert "25.50 USD" in listed.text
    api = await console.get(f"/v1/admin/tenants/{tenant.id}/credits", headers=operator_headers)
    assert [(c["amount_minor"], c["granted_by"]) for c in api.json()] == [(2550, operator_id)]
    [event] = await _operator_events(console.app, "credit.grant")
    assert event.actor == operator_id
    assert event.details["amount_minor"] == 2550
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        tenant_log = (
            await session.execute(
                select(AuditEvent).where(AuditEvent.tenant_id == tenant.id, AuditEvent.action == "credit.grant")
            )
        ).scalar_one()
    assert tenant_log.actor == operator_id  # the tenant's own log names the operator too
    bad = await console.post(f"/console/operator/tenants/{tenant.id}/credits", data={**form, "amount": "1.234"})
    assert bad.status_code == 400
    assert "2 decimal places" in bad.text
    unknown = await console.post("/console/operator/tenants/ten_nope/credits", data=form)
    assert unknown.status_code == 404


async def test_tenants_are_found_by_name_and_listed_a_page_at_a_time(console: Any) -> None:
    import secrets
    from datetime import UTC, datetime, timedelta

    from switchyard.platform.console.operator.queries import TENANTS_PER_PAGE
    from switchyard.platform.db import new_id
    from switchyard.platform.models import Tenant

    mark = secrets.token_hex(4)  # this test's tenants, whatever else the database holds
    start = datetime.now(UTC)
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        for n in range(TENANTS_PER_PAGE + 1):
            made = start + timedelta(seconds=n)
            session.add(Tenant(id=new_id("ten"), name=f"Paging {mark} {n:03d}", created_at=made))
        session.add(Tenant(id=new_id("ten"), name=f"50%_off {mark}"))
        session.add(Tenant(id=new_id("ten"), name=f"50xxoff {mark}"))
    await _add_operator(console.app)
    assert (await _operator_sign_in(console)).status_code == 303

    first = await console.get(f"/console/operator/?q=paging+{mark.upper()}")  # any case
    assert first.status_code == 200, first.text
    names = re.findall(rf">(Paging {mark} \d+)</a>", first.text)
    assert names == [f"Paging {mark} {n:03d}" for n in range(TENANTS_PER_PAGE, 0, -1)]  # newest first
    older = re.search(r'href="(/console/operator/\?after=\w+&amp;q=[^"]+)">Older tenants<', first.text)
    assert older
    rest = await console.get(older.group(1).replace("&amp;", "&"))
    assert re.findall(rf">(Paging {mark} \d+)</a>", rest.text) == [f"Paging {mark} 000"]
    assert "Older tenants" not in rest.text

    literal = await console.get(f"/console/operator/?q=50%25_off+{mark}")  # % and _ are letters, not patterns
    assert f">50%_off {mark}</a>" in literal.text
    assert f"50xxoff {mark}" not in literal.text
    nothing = await console.get(f"/console/operator/?q=nobody-{mark}")
    assert f"No tenant named like “nobody-{mark}”." in nothing.text


async def test_the_tenant_list_shows_this_month_s_compute_and_money_as_the_draft_invoice_does(
    console: Any, make_console_tenant: Any
) -> None:
    from datetime import UTC, datetime

    from switchyard.platform.db import TenantScope
    from tests.platform.billing.factories import rated_usage, receipt

    tenant, idle = await make_console_tenant(), await make_console_tenant()
    now = datetime.now(UTC)
    events = [receipt(chip_us=3_600_000_000, occurred_at=now), receipt(chip_us=1_800_000_000, occurred_at=now)]
    await rated_usage(console.app.state.database, TenantScope(tenant.id), *events)
    [draft] = (await console.get("/v1/invoices", headers=tenant.headers())).json()["data"]
    assert draft["total_minor"] > 0
    await _add_operator(console.app)
    await _operator_sign_in(console)
    listed = (await console.get("/console/operator/")).text
    row = re.search(rf'<a href="/console/operator/tenants/{tenant.id}">.*?</tr>', listed, re.S)
    assert row, listed
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    assert cells[0].strip() == '<span class="status active">active</span>'
    assert cells[2].strip() == "1.500000"  # chip-hours
    assert cells[3].strip() == f"{draft['total']} {draft['currency']}"
    other = re.search(rf'<a href="/console/operator/tenants/{idle.id}">.*?</tr>', listed, re.S)
    assert other, listed
    assert '<span class="status idle">idle</span>' in other.group(0)


async def test_rate_cards_are_listed_and_a_new_version_goes_through_the_billing_service(
    console: Any, operator_headers: dict[str, str]
) -> None:
    operator_id = await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get("/console/operator/rate-cards")
    assert page.status_code == 200
    form = {
        "instance_type": "trn2.48xlarge",
        "price_per_chip_hour": "3.125",
        "currency": "USD",
        "model": "*",
        "tenant_tier": "*",
        "effective_from": "",
        "source": "console test",
        "csrf_token": csrf_of(page.text),
    }
    made = await console.post("/console/operator/rate-cards", data=form)
    assert made.status_code == 303, made.text
    listed = await console.get(made.headers["location"])
    assert "3.125" in listed.text
    assert "console test" in listed.text
    cards = (await console.get("/v1/admin/rate-cards", headers=operator_headers)).json()["data"]
    assert any(c["price_per_chip_hour"].startswith("3.125") and c["source"] == "console test" for c in cards)
    assert [e.actor for e in await _operator_events(console.app, "rate_card.create")] == [operator_id]
    backdated = await console.post("/console/operator/rate-cards", data={**form, "effective_from": "2020-01-01T00:00"})
    assert backdated.status_code == 400
    assert "in the past" in backdated.text


async def test_the_fleet_fragment_shows_the_pool_s_replica_numbers(
    console: Any, make_console_tenant: Any, operator_headers: dict[str, str]
) -> None:
    tenant = await make_console_tenant()
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "Hi"}]}
    answer = await console.post("/v1/chat/completions", json=body, headers=tenant.headers())
    assert answer.status_code == 200, answer.text
    await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get("/console/operator/fleet")
    assert page.status_code == 200
    assert 'hx-get="/console/operator/fleet/replicas"' in page.text
    assert 'hx-trigger="every 2s"' in page.text
    fragment = await console.get("/console/operator/fleet/replicas", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="fleet"')  # the fragment alone, which htmx swaps in
    fleet = (await console.get("/v1/admin/fleet", headers=operator_headers)).json()
    replicas = [(d, r) for d in fleet["deployments"] for r in d["replicas"]]
    assert replicas
    assert any(r["chip_us"] > 0 for _, r in replicas)  # the completion above ran on one of them
    for deployment, replica in replicas:
        row = re.search(rf'<tr data-replica="{re.escape(replica["replica"])}">.*?</tr>', fragment.text, re.S)
        assert row, replica["replica"]
        cells = row.group(0)
        assert deployment["model"] in cells
        assert deployment["instance_type"] in cells
        assert f'<td class="num chip-s" data-label="Compute (chip-s)">{replica["chip_us"] / 1e6:,.3f}</td>' in cells
        assert f'<td class="num queued" data-label="Queue depth">{replica["queued"]}' in cells
        assert f'<td class="num running" data-label="Running">{replica["running"]}</td>' in cells
        assert f"{replica['kv_used_fraction'] * 100:.1f} %" in cells


def test_the_cli_creates_an_operator_login_whose_one_time_password_signs_in(tmp_path: Any) -> None:
    import asyncio

    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.settings import Settings

    runner = CliRunner(env={"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_DATABASE_URL": ""})
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    created = runner.invoke(main, ["operator", "login", "create", "--email", "Root@Ops.example"])
    assert created.exit_code == 0, created.output
    found = re.search(r"/console/operator/ as (\S+), one-time password (\S+)", created.output)
    assert found, created.output
    email, password = found.groups()
    assert email == "root@ops.example"
    again = runner.invoke(main, ["operator", "login", "create", "--email", "root@ops.example"])
    assert again.exit_code != 0
    assert "exists already" in again.output
    listed = runner.invoke(main, ["operator", "login", "list"])
    assert "root@ops.example" in listed.output
    assert password not in listed.output

    settings = Settings(data_dir=tmp_path / "data", time_scale=0)

    async def signed_in() -> str:
        async with AsyncTestClient(app=create_app(settings), base_url="https://switchyard.test") as client:
            client.follow_redirects = False
            answer = await _operator_sign_in(client, email, password)
            assert answer.status_code == 303
            assert "root@ops.example · operator" in (await client.get("/console/operator/")).text
            return str(answer.cookies[OPERATOR_SESSION_COOKIE])

    async def after_disabling(secret: str) -> None:
        async with AsyncTestClient(app=create_app(settings), base_url="https://switchyard.test") as client:
            client.follow_redirects = False
            client.cookies.set(OPERATOR_SESSION_COOKIE, secret, domain="switchyard.test", path="/console/operator")
            assert (await client.get("/console/operator/")).status_code == 302  # its session ended at once
            client.cookies.clear()
            assert (await _operator_sign_in(client, email, password)).status_code == 401

    secret = asyncio.run(signed_in())
    disabled = runner.invoke(main, ["operator", "login", "disable", "--email", email])
    assert disabled.exit_code == 0, disabled.output
    asyncio.run(after_disabling(secret))
    assert "disabled" in runner.invoke(main, ["operator", "login", "list"]).output


def test_an_upstream_deployment_without_replicas_of_its_own_is_one_row() -> None:
    from switchyard.platform.console.operator.queries import fleet_replicas

    upstream = {"model": "gpt-x", "backend": "openai-compatible", "instance_type": "p5.48xlarge", "replicas": []}
    simulated = {
        "model": "m",
        "backend": "trainium-sim",
        "instance_type": "trn2.48xlarge",
        "queued": 3,
        "running": 2,
        "replicas": [{"replica": "m/0", "busy_fraction": 0.5, "kv_used_fraction": 0.25, "queued": 1, "running": 2}],
    }
    rows = fleet_replicas([upstream, simulated])
    assert [(r.replica, r.backend, r.busy_fraction, r.queued) for r in rows] == [
        ("gpt-x (upstream)", "openai-compatible", None, None),
        ("m/0", "trainium-sim", 0.5, 1),
    ]
    assert (rows[1].deployment_queued, rows[1].running, rows[1].chip_us) == (3, 2, None)


@pytest.mark.slow
async def test_the_fleet_fragment_reads_a_fleet_process_through_the_remote_backend(fleet_settings: Any) -> None:  # noqa: F811
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.tenants.service import create_operator_key

    async with AsyncTestClient(app=create_app(fleet_settings), base_url="https://switchyard.test") as client:
        client.follow_redirects = False
        async with client.app.state.database.unit_of_work(UNSCOPED) as session:
            operator = bearer(await create_operator_key(session, actor=TEST_ACTOR, name="tests"))
        created = await client.post("/v1/admin/tenants", json={"name": "remote"}, headers=operator)
        owner = bearer(created.json()["owner_key"]["value"])
        body = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
        for _ in range(3):
            assert (await client.post("/v1/chat/completions", json=body, headers=owner)).status_code == 200
        await _add_operator(client.app)
        assert (await _operator_sign_in(client)).status_code == 303
        fragment = (await client.get("/console/operator/fleet/replicas")).text
        fleet = (await client.get("/v1/admin/fleet", headers=operator)).json()["deployments"]
    [small] = fleet
    assert [r["replica"] for r in small["replicas"]] == ["small/0", "small/1"]  # the fleet process's replicas
    assert sum(r["chip_us"] for r in small["replicas"]) > 0
    for replica in small["replicas"]:
        row = re.search(rf'<tr data-replica="{replica["replica"]}">.*?</tr>', fragment, re.S)
        assert row, fragment
        assert f">{replica['chip_us'] / 1e6:,.3f}</td>" in row.group(0)
        assert "trn2.3xlarge" in row.group(0)


async def test_a_poll_after_the_session_ended_sends_the_window_to_the_sign_in(console: Any) -> None:
    await _add_operator(console.app)
    await _operator_sign_in(console)
    poll = {"HX-Request": "true", "HX-Current-URL": "https://switchyard.test/console/operator/fleet"}
    assert (await console.get("/console/operator/fleet/replicas", headers=poll)).status_code == 200
    console.cookies.clear()  # the session is gone (signed out elsewhere, expired)
    ended = await console.get("/console/operator/fleet/replicas", headers=poll)
    assert ended.status_code == 200
    assert ended.text == ""  # nothing for htmx to swap into the table
    assert ended.headers["hx-redirect"] == "/console/operator/sign-in?next=/console/operator/fleet"
    plain = await console.get("/console/operator/fleet/replicas")  # without htmx: the usual redirect
    assert plain.status_code == 302


INVITATION = re.compile(r'id="owner-invitation" readonly value="https://switchyard\.test(/console/invitations/[^"]+)"')
RESET = re.compile(r'id="reset-link" readonly value="https://switchyard\.test(/console/password-reset/[^"]+)"')


async def test_an_operator_creates_a_tenant_whose_owner_gets_an_invitation_link(console: Any) -> None:
    operator_id = await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get("/console/operator/")
    form = {"name": "Globex", "owner_email": "Hank@Globex.example", "csrf_token": csrf_of(page.text)}
    assert (await console.post("/console/operator/tenants", data={**form, "csrf_token": "x"})).status_code == 403
    created = await console.post("/console/operator/tenants", data=form)
    assert created.status_code == 200, created.text
    assert "<h1>Globex is created</h1>" in created.text
    tenant_id = re.search(r'id="created-tenant-id">(ten_\w+)<', created.text)
    assert tenant_id
    assert 'id="created-owner-email">hank@globex.example<' in created.text
    assert re.search(r'id="owner-key" readonly value="sy_\w+_', created.text)  # shown this once
    link = INVITATION.search(created.text)
    assert link, created.text
    accept = await console.get(link.group(1))  # the owner's link opens the console's invitation page
    assert accept.status_code == 200, accept.text
    assert "hank@globex.example" in accept.text
    [event] = await _operator_events(console.app, "tenant.create")
    assert (event.actor, event.target_id) == (operator_id, tenant_id.group(1))
    listed = await console.get("/console/operator/?q=Globex")
    assert f'href="/console/operator/tenants/{tenant_id.group(1)}">Globex</a>' in listed.text
    log = await console.get("/console/operator/audit?action=tenant.create")
    assert f'tenant <a href="/console/operator/tenants/{tenant_id.group(1)}">' in log.text


async def test_a_refused_new_tenant_says_why_and_makes_nothing(console: Any) -> None:
    await _add_operator(console.app)
    await _operator_sign_in(console)
    token = csrf_of((await console.get("/console/operator/")).text)
    for fields, why in [
        ({"name": "", "owner_email": ""}, "name"),
        ({"name": "Initech", "owner_email": "not an address"}, "owner_email"),
    ]:
        refused = await console.post("/console/operator/tenants", data={**fields, "csrf_token": token})
        assert refused.status_code == 400
        assert re.search(rf'id="new-tenant-error">{why}: ', refused.text), refused.text
        assert f'value="{fields["name"]}"' in refused.text  # the form keeps what was typed
    assert await _operator_events(console.app, "tenant.create") == []


async def test_an_operator_issues_a_member_s_password_reset_link_audited_in_both_logs(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    operator_id = await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    assert tenant.emails["viewer"] in page.text  # the tenant's members are listed
    assert other.emails["viewer"] not in page.text
    member = tenant.member_ids["owner"]
    path = f"/console/operator/tenants/{tenant.id}/members/{member}/password-reset"
    assert (await console.post(path)).status_code == 403  # no CSRF token
    issued = await console.post(path, data={"csrf_token": csrf_of(page.text)})
    assert issued.status_code == 200, issued.text
    link = RESET.search(issued.text)
    assert link, issued.text
    assert f"A password-reset link for {tenant.emails['owner']}" in issued.text
    assert (await console.get(link.group(1))).status_code == 200  # the member's page to choose a password
    [event] = await _operator_events(console.app, "member.password_reset_issue")
    assert (event.actor, event.target_id, event.details["tenant_id"]) == (operator_id, member, tenant.id)
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        tenant_log = (
            await session.execute(
                select(AuditEvent).where(
                    AuditEvent.tenant_id == tenant.id, AuditEvent.action == "member.password_reset_issue"
                )
            )
        ).scalar_one()
    assert tenant_log.actor == operator_id
    # another tenant's member through this tenant's page, or an unknown tenant: 404, and nothing issued
    crossed = f"/console/operator/tenants/{tenant.id}/members/{other.member_ids['owner']}/password-reset"
    assert (await console.post(crossed, data={"csrf_token": csrf_of(page.text)})).status_code == 404
    unknown = f"/console/operator/tenants/ten_nope/members/{member}/password-reset"
    assert (await console.post(unknown, data={"csrf_token": csrf_of(page.text)})).status_code == 404
    assert len(await _operator_events(console.app, "member.password_reset_issue")) == 1


async def test_a_credit_names_the_operator_who_granted_it(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    form = {"amount": "5", "currency": "USD", "reason": "Goodwill", "csrf_token": csrf_of(page.text)}
    granted = await console.post(f"/console/operator/tenants/{tenant.id}/credits", data=form)
    assert granted.status_code == 303
    page = await console.get(granted.headers["location"])
    assert 'role="status">Credit granted.</p>' in page.text  # the action's success message, once
    assert '<a class="brand" href="/console/operator/">' in page.text  # the brand leads to the operator's home
    console.cookies.clear()
    sign_in_page = await console.get("/console/operator/sign-in?next=/console/operator/fleet")
    assert '<a class="brand" href="/console/operator/">' in sign_in_page.text  # signed out too
    row = re.search(r"<tr><td>[^<]*</td><td class=\"num\">5.00 USD</td>.*?</tr>", page.text, re.S)
    assert row, page.text
    assert f'<td class="actor">{OPERATOR_EMAIL} <span class="hint">operator</span></td>' in row.group(0)


async def test_a_suspended_tenant_s_keys_and_members_are_refused_until_it_is_reactivated(
    console: Any, make_console_tenant: Any, operator_headers: dict[str, str]
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    # one client holds both sessions: the member's cookie and the operator's (sent to the operator pages only)
    assert (await sign_in(console, tenant.emails["viewer"])).status_code == 303
    assert (await console.get("/console/")).status_code == 200
    operator_id = await _add_operator(console.app)
    await _operator_sign_in(console)
    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    confirm_path = f"/console/operator/tenants/{tenant.id}/suspend"
    assert f'href="{confirm_path}">Suspend ' in page.text  # a link to a confirmation page, not a button
    confirm = await console.get(confirm_path)
    assert confirm.status_code == 200
    assert "can no longer sign in" in confirm.text
    assert (await console.post(confirm_path)).status_code == 403  # no CSRF token: nothing changes
    assert (await console.get("/v1/models", headers=tenant.headers())).status_code == 200
    done = await console.post(confirm_path, data={"csrf_token": csrf_of(confirm.text)})
    assert done.status_code == 303
    page = await console.get(done.headers["location"])
    assert "is suspended.</p>" in page.text
    assert re.search(r'id="tenant-status"><span class="status suspended">suspended</span> since', page.text)

    console.app.state.key_cache.forget(tenant.keys["viewer"].split("_")[1])  # not verified before: no cached pass
    refused = await console.get("/v1/models", headers=tenant.headers("viewer"))
    assert refused.status_code == 401
    assert "suspended" in refused.text
    assert (await console.get("/v1/models", headers=other.headers("viewer"))).status_code == 200  # that tenant only
    assert (await console.get("/console/")).status_code == 302  # the member's open session ends at its next page
    console.cookies.delete(SESSION_COOKIE)
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 401

    api = await console.get(f"/v1/admin/tenants/{tenant.id}", headers=operator_headers)
    assert api.json()["suspended_at"] is not None
    again = await console.post(f"/v1/admin/tenants/{tenant.id}/suspend", headers=operator_headers)
    assert again.status_code == 200  # already suspended: nothing changes, nothing recorded
    [event] = await _operator_events(console.app, "tenant.suspend")
    assert (event.actor, event.target_id) == (operator_id, tenant.id)

    page = await console.get(f"/console/operator/tenants/{tenant.id}")
    back = await console.post(
        f"/console/operator/tenants/{tenant.id}/reactivate", data={"csrf_token": csrf_of(page.text)}
    )
    assert back.status_code == 303
    assert "is active again.</p>" in (await console.get(back.headers["location"])).text
    assert (await console.get("/v1/models", headers=tenant.headers("viewer"))).status_code == 200
    assert (await sign_in(console, tenant.emails["owner"])).status_code == 303
    [event] = await _operator_events(console.app, "tenant.reactivate")
    assert event.actor == operator_id
