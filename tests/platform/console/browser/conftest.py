"""Fixtures of the console's browser scenarios: the app served on 127.0.0.1 (SQLite, its runs executed in the
server) with a tenant, its members and real usage; Debian's Chromium driven by Playwright; a fresh page per test.

Every scenario saves a screenshot (into ``SWITCHYARD_TEST_SCREENSHOTS`` when set: the README's pictures under
``docs/console/`` come from such a run; otherwise into the test's temporary directory). Each module gets its own
server (module scope).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest

from switchyard.agents import StaticResolver
from switchyard.platform.app import create_app
from switchyard.platform.auth import Role
from switchyard.platform.bootstrap import CLI_ACTOR
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.settings import Settings
from switchyard.platform.tenants.service import create_tenant
from tests.platform.api.live import serve
from tests.platform.console.browser.served import CHROMIUM, MODELS, Console
from tests.platform.console.factories import PASSWORD, add_console_member
from tests.support.mcp import MCP_HOST, mcp_http_app
from tests.support.served import port_of, served


def _need_chromium() -> None:
    if not CHROMIUM.exists():  # .ci/run installs it and sets SWITCHYARD_TEST_BROWSER=required: CI never skips
        message = "needs Debian's chromium (apt-get install chromium)"
        if os.environ.get("SWITCHYARD_TEST_BROWSER") == "required":
            pytest.fail(message)
        pytest.skip(message)


async def _seed(settings: Settings) -> tuple[str, str, dict[str, str]]:
    database = Database(settings.database_url)
    try:
        async with database.unit_of_work(UNSCOPED) as session:
            tenant = await create_tenant(session, actor=CLI_ACTOR, name="Acme Robotics", owner_email="ada@acme.example")
        emails = {"owner": "grace@acme.example", "admin": "alan@acme.example", "viewer": "vera@acme.example"}
        app = SimpleNamespace(state=SimpleNamespace(database=database))
        for role, email in emails.items():
            await add_console_member(app, tenant.id, email, Role(role))
        return tenant.id, tenant.owner_key.value, emails
    finally:
        await database.dispose()


def _usage(console: Console) -> None:
    """Real usage: a budget, chat completions on two models and one agent run (executed in the server)."""
    from tests.platform.agents_api.factories import run_inline

    # the runs execute in the server's event loop; MCP servers named mcp.test reach the scenarios' own
    run_inline(
        SimpleNamespace(app=console.app), resolver=StaticResolver({MCP_HOST: ["127.0.0.1"]}), allow_loopback=True
    )
    with console.api() as api:
        assert api.post("/v1/budgets", json={"limit_minor": 500, "currency": "USD"}).status_code in (200, 201)
        for i in range(6):
            body = {
                "model": MODELS[i % 2],
                "messages": [{"role": "user", "content": f"Summarise the shift report number {i} in one line."}],
                "max_tokens": 64,
            }
            answer = api.post("/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
        agent = api.post(
            "/v1/agents", json={"name": "support-bot", "model": MODELS[0], "instructions": "Answer briefly."}
        )
        assert agent.status_code in (200, 201), agent.text
        run = api.post(
            "/v1/runs",
            json={"agent_id": agent.json()["id"], "thread": {"messages": [{"role": "user", "content": "Hello"}]}},
        )
        assert run.status_code in (200, 201), run.text


def _crm() -> Any:
    """The scenarios' MCP server: a CRM whose one tool finds a customer."""
    from mcp.server.mcpserver import MCPServer

    crm = MCPServer("crm")

    @crm.tool()
    def find_customer(email: str) -> str:
        """Find a customer by email."""
        return f"customer of {email}: Ada, since 2021"

    return crm


@pytest.fixture(scope="module")
def console(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[Console]:
    """The served console; a module's ``TIME_SCALE`` (default 0: answers at once) runs the simulated fleet on the
    wall clock, so answers stream as slowly as the simulated replicas produce them."""
    _need_chromium()
    root = tmp_path_factory.mktemp("console")
    shutil.copyfile(sqlite_template, root / "switchyard.db")
    settings = Settings(
        data_dir=root / "data",
        database_url=f"sqlite+aiosqlite:///{root / 'switchyard.db'}",
        time_scale=getattr(request.module, "TIME_SCALE", 0),
    )
    tenant_id, owner_key, emails = asyncio.run(_seed(settings))
    emails["owner"] = "ada@acme.example"  # the tenant's first owner signs in with the password set below
    shots = Path(os.environ.get("SWITCHYARD_TEST_SCREENSHOTS") or root / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    app = create_app(settings)
    with serve(app) as url, served(mcp_http_app(_crm())) as crm_url:
        crm = f"http://{MCP_HOST}:{port_of(crm_url)}/mcp"
        console = Console(url=url, app=app, owner_key=owner_key, emails=emails, shots=shots, mcp_url=crm)
        asyncio.run(_set_first_owner_password(settings, tenant_id))
        _usage(console)
        yield console


async def _set_first_owner_password(settings: Settings, tenant_id: str) -> None:
    from sqlalchemy import select

    from switchyard.platform.db import TenantScope
    from switchyard.platform.identity.passwords import set_password
    from switchyard.platform.models import Member

    database = Database(settings.database_url)
    try:
        async with database.unit_of_work(TenantScope(tenant_id)) as session:
            owner = (await session.execute(select(Member).where(Member.email == "ada@acme.example"))).scalar_one()
            await set_password(session, scope=TenantScope(tenant_id), member_id=owner.id, password=PASSWORD)
    finally:
        await database.dispose()


@pytest.fixture(scope="module")
def browser(console: Console) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser profile (no cookies) at 1280×800 that may reach 127.0.0.1 only; it records any attempt to
    reach another host and every console error (a CSP violation, a failed script)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.elsewhere = []  # type: ignore[attr-defined]
    page.errors = []  # type: ignore[attr-defined]

    def only_this_server(route: Any) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            page.elsewhere.append(route.request.url)  # type: ignore[attr-defined]
            route.abort()

    page.route("**/*", only_this_server)
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))  # type: ignore[attr-defined]
    page.on("pageerror", lambda error: page.errors.append(str(error)))  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
