"""Password attempts are limited per account and address, per address and per account, the address being the
peer's unless a trusted proxy forwarded the request; the password form spends the same allowance; argon2 runs off
the event loop, one at a time per process, and a refused attempt costs no hash."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from argon2 import PasswordHasher
from click.testing import CliRunner
from sqlalchemy import create_engine, select

from switchyard.platform.cli import main
from switchyard.platform.console.edge import SESSION_COOKIE
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.http.client_address import forwarded_client
from switchyard.platform.identity import passwords
from switchyard.platform.identity.attempts import FAILURES_PER_ACCOUNT, FAILURES_PER_ACCOUNT_AND_CLIENT
from switchyard.platform.identity.sessions import password_hash_of
from switchyard.platform.limits import MemoryRateLimiter
from switchyard.platform.models import AuditEvent
from switchyard.platform.priority import thread_niceness
from tests.platform.console.factories import PASSWORD, csrf_of, page_csrf, sign_in
from tests.support.health import wait_healthy
from tests.support.ports import free_port

PROXY = "10.9.0.2"  # the one trusted proxy of these tests
WRONG = "guess guess guess"
UPSTREAM_ONLY = {"name": "up", "backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "chips": 1}


@pytest.fixture
def settings(settings: Any, shared_apps: Any) -> Any:
    return shared_apps.settings(
        data_dir=settings.data_dir, database_url=settings.database_url, trusted_proxies=f"{PROXY}/32"
    )


@asynccontextmanager
async def browser(app: Any, peer: str, forwarded_for: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A browser whose connection comes from ``peer`` (and which sends ``X-Forwarded-For`` when given)."""
    headers = {"x-forwarded-for": forwarded_for} if forwarded_for else {}
    transport = httpx.ASGITransport(app=app, client=(peer, 40_000))
    async with httpx.AsyncClient(transport=transport, base_url="https://switchyard.test", headers=headers) as client:
        yield client


async def _failed_sign_in_clients(app: Any, tenant_id: str) -> list[str]:
    async with app.state.database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            select(AuditEvent).where(AuditEvent.tenant_id == tenant_id, AuditEvent.action == "console.sign_in_failed")
        )
        return [event.details["client"] for event in rows.scalars()]


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "trusted", "client"),
    [
        ("203.0.113.1", ["198.51.100.7"], "", "203.0.113.1"),  # no trusted proxy: the header is nobody's word
        ("127.0.0.1", ["198.51.100.7"], "", "127.0.0.1"),  # loopback is no exception
        ("203.0.113.1", ["198.51.100.7"], "10.0.0.0/8", "203.0.113.1"),  # a peer that is no trusted proxy
        ("10.0.0.5", ["6.6.6.6, 198.51.100.7"], "10.0.0.0/8", "198.51.100.7"),  # the right-most hop it vouches for
        ("10.0.0.5", ["6.6.6.6", "198.51.100.7, 10.0.0.9"], "10.0.0.0/8", "198.51.100.7"),  # through two proxies
        ("10.0.0.5", ["10.0.0.7, 10.0.0.9"], "10.0.0.0/8", "10.0.0.7"),  # all trusted: the left-most
        ("10.0.0.5", ["198.51.100.7, not-an-address"], "10.0.0.0/8", "10.0.0.5"),  # garbage: the last trusted hop
        ("10.0.0.5", [], "10.0.0.0/8", "10.0.0.5"),  # no header
        ("::ffff:10.0.0.5", ["198.51.100.7"], "10.0.0.5", "198.51.100.7"),  # a dual-stack socket's IPv4 peer
        ("2001:db8::5", ["2001:db8:1::7"], "2001:db8::/64", "2001:db8:1::7"),
    ],
)
def test_the_client_address_believes_only_trusted_proxies(
    peer: str, forwarded_for: list[str], trusted: str, client: str
) -> None:
    assert forwarded_client(peer, forwarded_for, trusted) == client


async def test_forwarded_for_from_a_peer_that_is_no_trusted_proxy_is_ignored(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    for n in range(FAILURES_PER_ACCOUNT_AND_CLIENT):  # a new forged address each time, all from one loopback peer
        async with browser(console.app, "127.0.0.1", f"198.51.100.{n}") as client:
            assert (await sign_in(client, tenant.emails["owner"], WRONG)).status_code == 401
    async with browser(console.app, "127.0.0.1", "198.51.100.99") as client:
        refused = await sign_in(client, tenant.emails["owner"])
    assert refused.status_code == 429
    assert await _failed_sign_in_clients(console.app, tenant.id) == ["127.0.0.1"] * FAILURES_PER_ACCOUNT_AND_CLIENT


async def test_forwarded_for_from_a_trusted_proxy_names_the_client(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):  # what the client wrote at the left is not believed
        async with browser(console.app, PROXY, f"6.6.6.6, 198.51.100.7, {PROXY}") as client:
            assert (await sign_in(client, tenant.emails["owner"], WRONG)).status_code == 401
    assert await _failed_sign_in_clients(console.app, tenant.id) == ["198.51.100.7"] * FAILURES_PER_ACCOUNT_AND_CLIENT
    async with browser(console.app, PROXY, "198.51.100.7") as client:
        assert (await sign_in(client, tenant.emails["owner"])).status_code == 429
    async with browser(console.app, PROXY, "203.0.113.5") as client:  # the owner, behind the same proxy
        assert (await sign_in(client, tenant.emails["owner"])).status_code == 303


async def test_an_attacker_s_failures_do_not_lock_the_owner_out_from_another_address(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    async with browser(console.app, "203.0.113.9") as attacker:
        for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
            assert (await sign_in(attacker, tenant.emails["owner"], WRONG)).status_code == 401
        locked = await sign_in(attacker, tenant.emails["owner"])  # even the right password, from there
        assert locked.status_code == 429
        assert int(locked.headers["retry-after"]) > 0
    async with browser(console.app, "198.51.100.20") as owner:
        answer = await sign_in(owner, tenant.emails["owner"])
        assert answer.status_code == 303
        assert SESSION_COOKIE in answer.cookies


async def test_many_addresses_together_are_limited_per_account(console: Any, make_console_tenant: Any) -> None:
    # on a clock that stands still: the account's 50 failures a window come back one every 6 s, and 50 hashed
    # sign-ins take longer than that on a busy machine (one came back mid-test and the 51st was let through)
    console.app.state.gateway.admission.rates = MemoryRateLimiter(lambda: 0.0)
    tenant = await make_console_tenant()
    addresses = FAILURES_PER_ACCOUNT // FAILURES_PER_ACCOUNT_AND_CLIENT
    for n in range(addresses):
        async with browser(console.app, f"198.18.0.{n}") as client:
            for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
                assert (await sign_in(client, tenant.emails["viewer"], WRONG)).status_code == 401
    async with browser(console.app, "198.18.1.1") as fresh:
        assert (await sign_in(fresh, tenant.emails["viewer"], WRONG)).status_code == 429
        assert (await sign_in(fresh, tenant.emails["admin"], WRONG)).status_code == 401  # other accounts may


async def test_the_password_form_spends_the_sign_in_allowance(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    assert (await sign_in(console, tenant.emails["developer"])).status_code == 303
    token = await page_csrf(console, "/console/password")
    new = "a brand new passphrase"
    for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
        wrong = {"current_password": WRONG, "new_password": new, "csrf_token": token}
        assert (await console.post("/console/password", data=wrong)).status_code == 400
    right = {"current_password": PASSWORD, "new_password": new, "csrf_token": token}
    limited = await console.post("/console/password", data=right)
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) > 0
    assert "Too many wrong passwords" in limited.text
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        stored = await password_hash_of(session, scope=TenantScope(tenant.id), member_id=tenant.member_ids["developer"])
    assert stored is not None
    assert PasswordHasher().verify(stored, PASSWORD)  # nothing was changed
    console.cookies.clear()
    assert (await sign_in(console, tenant.emails["developer"])).status_code == 429  # and sign-in is spent too


class GatedHasher(PasswordHasher):
    """argon2 as configured, but each verification waits for ``gate`` and records its thread and concurrency."""

    def __init__(self, like: PasswordHasher) -> None:
        super().__init__(time_cost=like.time_cost, memory_cost=like.memory_cost, parallelism=like.parallelism)
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.threads: list[int] = []
        self.niceness: list[int] = []
        self.gate_was_open: list[bool] = []
        self.running = 0
        self.most_at_once = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        with self.lock:
            self.threads.append(threading.get_ident())
            self.niceness.append(thread_niceness())
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            self.gate_was_open.append(self.gate.wait(timeout=10))
            return super().verify(hash, password)
        finally:
            with self.lock:
                self.running -= 1


async def test_argon2_runs_off_the_event_loop_one_at_a_time_at_a_lower_priority(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One hash at a time per process, on a thread of lower CPU priority: at the default cost (64 MiB, p=4) a hash
    keeps both cores of a small host busy, and two at a time, or one at the event loop's priority, let a sign-in
    flood take the cores from the tenants' requests (issue 22)."""
    tenant = await make_console_tenant()
    hasher = GatedHasher(passwords._hasher)
    monkeypatch.setattr(passwords, "_hasher", hasher)

    async def attempt(n: int) -> int:
        async with browser(console.app, f"198.51.100.{n}") as client:
            return int((await sign_in(client, tenant.emails["owner"], WRONG)).status_code)

    attempts = [asyncio.create_task(attempt(n)) for n in range(6)]
    for _ in range(2000):  # until all six have reached hashing: one running, the others waiting for their turn
        if hasher.running and passwords._hashing._work_queue.qsize() == 5:
            break
        await asyncio.sleep(0.005)
    assert hasher.running == passwords.HASHING_THREADS == 1
    assert (await console.get("/healthz")).status_code == 200  # the loop serves others while they hash
    hasher.gate.set()
    assert await asyncio.gather(*attempts) == [401] * 6
    assert hasher.gate_was_open == [True] * 6
    assert threading.get_ident() not in hasher.threads
    assert hasher.most_at_once == 1
    assert hasher.niceness == [min(19, thread_niceness() + passwords.HASHING_NICE)] * 6


class CountingHasher(PasswordHasher):
    """argon2 as configured, counting its hashes and verifications."""

    def __init__(self, like: PasswordHasher) -> None:
        super().__init__(time_cost=like.time_cost, memory_cost=like.memory_cost, parallelism=like.parallelism)
        self.verified = 0
        self.hashed = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        self.verified += 1
        return super().verify(hash, password)

    def hash(self, password: str | bytes, *, salt: bytes | None = None) -> str:
        self.hashed += 1
        return super().hash(password, salt=salt)


async def test_a_limited_attempt_costs_no_hash(
    console: Any, make_console_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The allowance is spent before argon2 runs: a flood past its limit is refused without a hash each."""
    tenant = await make_console_tenant()
    hasher = CountingHasher(passwords._hasher)
    monkeypatch.setattr(passwords, "_hasher", hasher)
    async with browser(console.app, "203.0.113.77") as attacker:
        for _ in range(FAILURES_PER_ACCOUNT_AND_CLIENT):
            assert (await sign_in(attacker, tenant.emails["owner"], WRONG)).status_code == 401
        assert (hasher.verified, hasher.hashed) == (FAILURES_PER_ACCOUNT_AND_CLIENT, 0)
        for _ in range(20):
            assert (await sign_in(attacker, tenant.emails["owner"], WRONG)).status_code == 429
            assert (await sign_in(attacker, tenant.emails["owner"])).status_code == 429  # the right one too
    assert (hasher.verified, hasher.hashed) == (FAILURES_PER_ACCOUNT_AND_CLIENT, 0)


@pytest.mark.slow
def test_switchyard_api_believes_no_forwarded_for_from_loopback_by_default(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """uvicorn believes ``X-Forwarded-For`` from 127.0.0.1 unless told otherwise: ``switchyard api`` tells it."""
    shutil.copyfile(sqlite_template, tmp_path / "switchyard.db")
    (tmp_path / "fleet.json").write_text(json.dumps({"deployments": [UPSTREAM_ONLY]}))
    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'switchyard.db'}",
        "SWITCHYARD_FLEET_FILE": str(tmp_path / "fleet.json"),
        "SWITCHYARD_PASSWORD_HASH": "m=19456,t=2,p=1",
    }
    created = CliRunner(env=env).invoke(main, ["tenant", "create", "Acme", "--owner-email", "boss@acme.io"])
    assert created.exit_code == 0, created.output
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "api.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "api", "--port", str(port)],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_healthy(url, process=process, log=tmp_path / "api.log")
            form = httpx.get(f"{url}/console/sign-in")
            cookie = form.headers["set-cookie"].split(";")[0]
            answer = httpx.post(
                f"{url}/console/sign-in",
                data={"email": "boss@acme.io", "password": WRONG, "csrf_token": csrf_of(form.text)},
                headers={"cookie": cookie, "x-forwarded-for": "203.0.113.66"},
            )
            assert answer.status_code == 401
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    engine = create_engine(f"sqlite:///{tmp_path / 'switchyard.db'}")
    with engine.connect() as connection:
        rows = connection.execute(select(AuditEvent.details).where(AuditEvent.action == "console.sign_in_failed")).all()
    engine.dispose()
    assert [json.loads(d) if isinstance(d, str) else d for (d,) in rows] == [{"client": "127.0.0.1"}]
