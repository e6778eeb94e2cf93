"""Console sign-in: passwords, sessions, cookies, CSRF, expiry, rate limits and the audit log, over HTTP."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import SecretStr
from sqlalchemy import select, update

from switchyard.platform.cli import main
from switchyard.platform.console.edge import SESSION_COOKIE
from switchyard.platform.db import UNSCOPED
from switchyard.platform.identity.attempts import FAILURES_PER_ACCOUNT_AND_CLIENT
from switchyard.platform.identity.sessions import IDLE_TIMEOUT
from switchyard.platform.models import AuditEvent, ConsoleSession, MemberPassword, utc_now
from tests.platform.console.factories import PASSWORD, csrf_of, page_csrf, sign_in
from tests.support.smtp import smtp_server


async def _audit_actions(app: Any, tenant_id: str) -> list[str]:
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(select(AuditEvent.action).where(AuditEvent.tenant_id == tenant_id))
        return [action for (action,) in rows]


async def test_a_member_signs_in_with_email_and_password_and_gets_a_hardened_cookie(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    assert (await console.get("/console/")).status_code == 302
    answer = await sign_in(console, tenant.emails["admin"].upper())  # emails compare case-insensitively
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    for flag in ("HttpOnly", "Secure", "SameSite=lax", "Path=/console"):
        assert flag in cookie
    overview = await console.get("/console/")
    assert overview.status_code == 200
    assert tenant.emails["admin"] in overview.text
    assert "default-src 'self'" in overview.headers["content-security-policy"]
    assert "console.sign_in" in await _audit_actions(console.app, tenant.id)


async def test_the_cookie_secret_is_not_stored_and_passwords_are_argon2_hashes(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    answer = await sign_in(console, tenant.emails["viewer"])
    secret = answer.cookies[SESSION_COOKIE]
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        sessions = (await session.execute(select(ConsoleSession))).scalars().all()
        hashes = (await session.execute(select(MemberPassword.password_hash))).scalars().all()
    assert sessions
    assert all(secret not in (row.token_sha256, row.csrf_token) for row in sessions)
    assert hashes
    assert all(h.startswith("$argon2id$") and PASSWORD not in h for h in hashes)


async def test_a_wrong_password_is_refused_and_audited_for_the_member_s_tenant(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    answer = await sign_in(console, tenant.emails["owner"], "not the password at all")
    assert answer.status_code == 401
    assert "Wrong email or password" in answer.text
    assert SESSION_COOKIE not in answer.cookies
    assert "console.sign_in_failed" in await _audit_actions(console.app, tenant.id)
    unknown = await sign_in(console, "nobody@nowhere.example")
    assert unknown.status_code == 401  # the same answer for an unknown email
    assert (await console.get("/console/")).status_code == 302


async def test_failed_sign_ins_are_rate_limited_per_account_and_address_even_with_the_right_password(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
        assert (await sign_in(console, tenant.emails["owner"], "guess guess guess")).status_code == 401
    locked = await sign_in(console, tenant.emails["owner"])
    assert locked.status_code == 429
    assert int(locked.headers["retry-after"]) > 0
    assert SESSION_COOKIE not in locked.cookies
    other = await sign_in(console, tenant.emails["admin"])  # another account from the same client still may
    assert other.status_code == 303


async def test_a_successful_sign_in_does_not_use_up_the_allowance(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT + 2):
        console.cookies.clear()  # a new browser each time
        assert (await sign_in(console, tenant.emails["viewer"])).status_code == 303


async def test_every_form_needs_the_session_s_csrf_token(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["owner"])
    token = await page_csrf(console, "/console/keys")
    assert (await console.post("/console/keys", data={"name": "x", "role": "viewer"})).status_code == 403
    wrong = {"name": "x", "role": "viewer", "csrf_token": token[:-2] + "xx"}
    assert (await console.post("/console/keys", data=wrong)).status_code == 403
    foreign = await console.post(
        "/console/keys",
        data={"name": "x", "role": "viewer", "csrf_token": token},
        headers={"origin": "https://evil.example"},
    )
    assert foreign.status_code == 403
    assert (
        await console.post("/console/keys", data={"name": "x", "role": "viewer", "csrf_token": token})
    ).status_code == 200
    assert (await console.post("/console/sign-out")).status_code == 403  # sign-out too


async def test_the_sign_in_form_needs_its_double_submit_token(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    page = await console.get("/console/sign-in")
    form = {"email": tenant.emails["owner"], "password": PASSWORD}
    assert (await console.post("/console/sign-in", data=form)).status_code == 403
    assert (await console.post("/console/sign-in", data={**form, "csrf_token": "forged" * 8})).status_code == 403
    assert (await console.post("/console/sign-in", data={**form, "csrf_token": csrf_of(page.text)})).status_code == 303


async def test_sign_out_ends_the_session_on_the_server(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    answer = await sign_in(console, tenant.emails["developer"])
    secret = answer.cookies[SESSION_COOKIE]
    out = await console.post("/console/sign-out", data={"csrf_token": await page_csrf(console)})
    assert out.status_code == 303
    console.cookies.set(SESSION_COOKIE, secret, domain="switchyard.test", path="/console")  # replay the old cookie
    again = await console.get("/console/agents")
    assert again.status_code == 302
    assert again.headers["location"].startswith("/console/sign-in?next=/console/agents")
    assert "console.sign_out" in await _audit_actions(console.app, tenant.id)


@pytest.mark.parametrize("how", ["expired", "idle"])
async def test_an_expired_or_idle_session_signs_out(console: Any, make_console_tenant: Any, how: str) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["owner"])
    assert (await console.get("/console/")).status_code == 200
    past = utc_now() - timedelta(seconds=1)
    values = {"expires_at": past} if how == "expired" else {"last_seen_at": past - IDLE_TIMEOUT}
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(update(ConsoleSession).values(**values))
    assert (await console.get("/console/")).status_code == 302


async def test_api_keys_do_not_open_the_console_and_sessions_do_not_open_the_api(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    as_key = await console.get("/console/", headers={"Authorization": f"Bearer {tenant.keys['owner']}"})
    assert as_key.status_code == 302
    key_as_password = await sign_in(console, tenant.emails["owner"], tenant.keys["owner"])
    assert key_as_password.status_code == 401
    await sign_in(console, tenant.emails["owner"])
    cookie = console.cookies.get(SESSION_COOKIE)
    assert cookie
    for path in ("/v1/members", "/v1/agents", "/v1/api-keys"):
        api = await console.get(path, headers={"cookie": f"{SESSION_COOKIE}={cookie}"})
        assert api.status_code == 401, path
    as_bearer = await console.get("/v1/members", headers={"Authorization": f"Bearer {cookie}"})
    assert as_bearer.status_code == 401


async def test_a_role_change_or_removal_applies_to_live_sessions(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    assert (await console.get("/console/keys")).status_code == 200
    owner = {"Authorization": f"Bearer {tenant.keys['owner']}"}
    demoted = await console.patch(f"/v1/members/{tenant.member_ids['admin']}", json={"role": "viewer"}, headers=owner)
    assert demoted.status_code == 200, demoted.text
    assert (await console.get("/console/keys")).status_code == 403
    removed = await console.delete(f"/v1/members/{tenant.member_ids['admin']}", headers=owner)
    assert removed.status_code == 200, removed.text
    assert (await console.get("/console/")).status_code == 302


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/console", "/v1/members"])
async def test_sign_in_only_returns_to_console_pages(console: Any, make_console_tenant: Any, target: str) -> None:
    tenant = await make_console_tenant()
    form = await console.get("/console/sign-in", params={"next": target})
    answer = await console.post(
        "/console/sign-in",
        data={"email": tenant.emails["owner"], "password": PASSWORD, "csrf_token": csrf_of(form.text), "next": target},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/"


# The WHATWG HTML standard's "valid e-mail address": what the sign-in page's <input type=email> accepts.
BROWSER_EMAIL = re.compile(
    r"^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$"
)


@pytest.mark.parametrize("owner_email", ["Boss@Acme.io", None])
def test_tenant_create_prints_an_invitation_link_with_which_the_owner_chooses_a_password_and_signs_in(
    tmp_path: Path, owner_email: str | None
) -> None:
    import asyncio

    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.settings import Settings

    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": "",
        "SWITCHYARD_PUBLIC_URL": "https://switchyard.test",
    }
    runner = CliRunner(env=env)
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    owner = ["--owner-email", owner_email] if owner_email else []
    created = runner.invoke(main, ["tenant", "create", "Acme", *owner])
    assert created.exit_code == 0, created.output
    printed = r"console:\s+(\S+) sets a password and signs in at https://switchyard\.test(/\S+)"
    found = re.search(printed, created.output)
    assert found, created.output
    email, link = found.groups()
    assert email == (owner_email.lower() if owner_email else email)
    assert BROWSER_EMAIL.match(email), email  # the sign-in page's field takes it (not owner@ten_….invalid)
    assert email.endswith(".invalid") == (owner_email is None)

    async def go() -> None:
        settings = Settings(data_dir=tmp_path / "data", time_scale=0)
        async with AsyncTestClient(app=create_app(settings), base_url="https://switchyard.test") as client:
            client.follow_redirects = False
            form = await client.get(link)
            assert form.status_code == 200, form.text
            assert email in form.text
            chosen = "the owner's own password"
            joined = await client.post(link, data={"new_password": chosen, "csrf_token": csrf_of(form.text)})
            assert joined.status_code == 303, joined.text
            assert f"{email} · owner · Acme" in (await client.get("/console/")).text
            client.cookies.clear()
            assert (await client.get(link)).status_code == 410  # one use
            assert (await sign_in(client, email, chosen)).status_code == 303
            assert f"{email} · owner · Acme" in (await client.get("/console/")).text

    asyncio.run(go())


async def test_the_admin_api_answers_a_new_tenant_s_owner_invitation_link(client: Any, operator_key: str) -> None:
    created = await client.post(
        "/v1/admin/tenants", json={"name": "Linked"}, headers={"Authorization": f"Bearer {operator_key}"}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["owner_key"]["value"].startswith("sy_")  # the answer as before ...
    settings = client.app.state.settings
    link = body["owner_invitation_url"]  # ... and the owner's link, on SWITCHYARD_PUBLIC_URL
    assert link.startswith(f"{settings.public_url}/console/invitations/")
    assert body["owner_invitation_expires_at"]
    assert BROWSER_EMAIL.match(body["owner_email"])
    client.base_url = "https://switchyard.test"
    client.follow_redirects = False
    path = link.removeprefix(settings.public_url)
    form = await client.get(path)
    assert form.status_code == 200, form.text
    joined = await client.post(path, data={"new_password": "an owner's password", "csrf_token": csrf_of(form.text)})
    assert joined.status_code == 303
    assert f"{body['owner_email']} · owner · Linked" in (await client.get("/console/")).text
    schema = (await client.get("/schema/openapi.json")).json()
    fields = schema["components"]["schemas"]["TenantCreated"]["properties"]
    assert {"owner_key", "owner_invitation_url", "owner_invitation_expires_at"} <= set(fields)


def test_passwords_are_hashed_at_rfc_9106_s_cost_unless_configured_and_never_below_owasp_s_minimum() -> None:
    from pydantic import ValidationError

    from switchyard.platform.settings import Settings

    assert Settings.model_fields["password_hash"].default == "m=65536,t=3,p=4"
    assert Settings(password_hash=" t=1, m=47104, p=2").password_hash == "m=47104,t=1,p=2"  # OWASP's first pair
    for weak, named in (
        ("m=19456,t=1,p=1", "weaker than OWASP"),
        ("m=4096,t=9,p=1", "weaker than OWASP"),
        ("fast", "is not m=<memory KiB>"),
        ("m=65536,t=3", "is not m="),
        ("m=65536,t=3,p=0", "p=0"),
    ):
        with pytest.raises(ValidationError, match=named):
            Settings(password_hash=weak)


async def test_a_password_hashed_at_another_cost_is_hashed_again_at_today_s_on_sign_in(
    console: Any, make_console_tenant: Any, settings: Any
) -> None:
    from argon2 import PasswordHasher

    from switchyard.platform.identity.passwords import hash_password
    from switchyard.platform.settings import argon2_cost

    tenant = await make_console_tenant()
    member_id = tenant.member_ids["developer"]
    older = PasswordHasher(time_cost=4, memory_cost=32_768, parallelism=2).hash(PASSWORD)  # yesterday's cost
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(MemberPassword).where(MemberPassword.member_id == member_id).values(password_hash=older)
        )
    memory, passes, lanes = argon2_cost(settings.password_hash)  # the app hashes at the configured cost
    today = f"$m={memory},t={passes},p={lanes}$"
    assert today in await hash_password("x" * 12)

    assert (await sign_in(console, tenant.emails["developer"])).status_code == 303  # the old hash still verifies
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        stored = (
            await session.execute(select(MemberPassword.password_hash).where(MemberPassword.member_id == member_id))
        ).scalar_one()
    assert stored != older
    assert today in stored  # hashed again, at the configured cost
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["developer"])).status_code == 303  # and the new hash verifies


async def test_forgot_password_without_mail_says_to_ask_an_admin(console: Any) -> None:
    sign_in_page = await console.get("/console/sign-in")
    assert '<a href="/console/password-reset">Forgot your password?</a>' in sign_in_page.text
    forgot = await console.get("/console/password-reset")
    assert forgot.status_code == 200
    assert "Ask an admin or owner of your tenant" in forgot.text
    assert 'name="email"' not in forgot.text
    posted = await console.post(
        "/console/password-reset", data={"email": "a@b.example", "csrf_token": csrf_of(sign_in_page.text)}
    )
    assert posted.status_code == 400


async def test_forgot_password_mails_a_link_to_a_member_and_tells_nobody_who_is_one(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_console_tenant()
    email = tenant.emails["developer"]
    with smtp_server() as mail:
        monkeypatch.setattr(console.app.state.settings, "smtp_url", SecretStr(mail.url))
        form = await console.get("/console/password-reset")
        assert 'name="email"' in form.text
        csrf = csrf_of(form.text)
        unknown = await console.post("/console/password-reset", data={"email": "nobody@x.example", "csrf_token": csrf})
        known = await console.post("/console/password-reset", data={"email": email.upper(), "csrf_token": csrf})
        assert unknown.status_code == known.status_code == 200
        assert "is on its way" in known.text
        assert unknown.text.replace("nobody@x.example", "") == known.text.replace(email.upper(), "")  # no hint
        (sent,) = mail.messages  # none to the unknown address
    assert sent.recipients == [email]
    path = re.search(r"https://switchyard\.test(/console/password-reset/\S+)", sent.body)
    assert path, sent.body
    assert "works once, for 60 minutes" in sent.body

    reset_form = await console.get(path.group(1))
    chosen = "remembered at last, a new one"
    used = await console.post(path.group(1), data={"new_password": chosen, "csrf_token": csrf_of(reset_form.text)})
    assert used.status_code == 303
    console.cookies.clear()
    assert (await sign_in(console, email, chosen)).status_code == 303
    assert "member.password_reset" in await _audit_actions(console.app, tenant.id)


async def test_asking_for_reset_mails_is_rate_limited_like_sign_in(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_console_tenant()
    with smtp_server() as mail:
        monkeypatch.setattr(console.app.state.settings, "smtp_url", SecretStr(mail.url))
        csrf = csrf_of((await console.get("/console/password-reset")).text)
        ask = {"email": tenant.emails["viewer"], "csrf_token": csrf}
        for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
            assert (await console.post("/console/password-reset", data=ask)).status_code == 200
        refused = await console.post("/console/password-reset", data=ask)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 0
        assert len(mail.messages) == FAILURES_PER_ACCOUNT_AND_CLIENT  # the refused one sent nothing
