"""The operator's console in a real browser (Debian's Chromium via Playwright, the fixtures of this directory's
``conftest.py``): sign in as an operator, read the tenants, grant a credit, and watch the fleet refresh."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from switchyard.platform.bootstrap import CLI_ACTOR
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.identity.operator_accounts import create_operator_account
from tests.platform.console.browser.served import MODELS, Console
from tests.platform.console.factories import PASSWORD

pytestmark = pytest.mark.slow

OPERATOR_EMAIL = "ops@switchyard.example"


@pytest.fixture(scope="module")
def operator(console: Console) -> str:
    """An operator console account on the served app (made as `switchyard operator login create` makes one)."""

    async def make() -> None:
        database = Database(console.app.state.settings.database_url)
        try:
            async with database.unit_of_work(UNSCOPED) as session:
                await create_operator_account(session, actor=CLI_ACTOR, email=OPERATOR_EMAIL, password=PASSWORD)
        finally:
            await database.dispose()

    asyncio.run(make())
    return OPERATOR_EMAIL


def _operator_sign_in(page: Any, console: Console, email: str) -> None:
    """Sign in with the keyboard alone at the operator's own sign-in page."""
    page.goto(f"{console.url}/console/operator/fleet")
    assert "/console/operator/sign-in" in page.url  # no operator session: the operator sign-in, not the members'
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(re.compile(re.escape(console.url) + r"/console/operator/fleet$"))
    page.get_by_role("heading", name="Fleet", exact=True).wait_for()


def _chat(console: Console) -> None:
    with console.api() as api:
        body = {"model": MODELS[0], "messages": [{"role": "user", "content": "Count the open tickets."}]}
        answer = api.post("/v1/chat/completions", json={**body, "max_tokens": 48})
        assert answer.status_code == 200, answer.text


def test_an_operator_reads_tenants_grants_a_credit_and_watches_the_fleet(
    console: Console, operator: str, page: Any
) -> None:
    _operator_sign_in(page, console, operator)
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert "switchyard_console" not in cookies  # an operator session is not a member's
    session = cookies["switchyard_operator"]
    assert session["httpOnly"]
    assert session["secure"]
    assert session["sameSite"] == "Lax"
    assert page.get_by_text(f"{operator} · operator").is_visible()

    page.get_by_role("link", name="Tenants").click()
    page.get_by_role("heading", name="Tenants").wait_for()
    row = page.locator("#tenants tbody tr", has_text="Acme Robotics")
    assert float(row.locator("td").nth(3).inner_text().replace(",", "")) > 0  # chip-hours from the module's usage
    page.screenshot(path=str(console.shots / "operator_tenants.png"), full_page=True)

    row.get_by_role("link", name="Acme Robotics").click()
    page.get_by_role("heading", name="Acme Robotics").wait_for()
    page.get_by_label("Amount").fill("40.001")  # refused by the server, which says why
    page.get_by_label("Reason (the tenant sees it on its invoice)").fill("Launch credit")
    page.get_by_role("button", name="Grant credit").click()
    page.get_by_role("alert").filter(has_text="2 decimal places").wait_for()
    assert page.get_by_label("Reason (the tenant sees it on its invoice)").input_value() == "Launch credit"  # kept
    page.get_by_label("Amount").fill("40.00")
    page.get_by_label("Currency").select_option("USD")
    page.get_by_label("Reason (the tenant sees it on its invoice)").fill("Launch credit")
    page.get_by_role("button", name="Grant credit").click()
    page.locator("#credit-balance", has_text="40.00 USD").wait_for()
    assert "Launch credit" in page.locator("#credits").inner_text()
    page.screenshot(path=str(console.shots / "operator_tenant.png"), full_page=True)

    page.get_by_role("link", name="Fleet").click()
    page.get_by_role("heading", name="Fleet", exact=True).wait_for()
    replicas = page.locator("#replicas tbody tr[data-replica]")
    assert replicas.count() >= 2  # both models' replicas
    chip_s = page.locator("#replicas .chip-s").all_inner_texts()
    first_refresh = page.locator("#fleet-refreshed").get_attribute("datetime")
    _chat(console)  # new work on the fleet: the next refresh shows it without a reload
    page.wait_for_function(
        "([before, was]) => document.querySelector('#fleet-refreshed').getAttribute('datetime') !== was"
        " && [...document.querySelectorAll('#replicas .chip-s')].map(e => e.textContent).join() !== before.join()",
        arg=[chip_s, first_refresh],
        timeout=10_000,
    )
    assert page.url.endswith("/console/operator/fleet")  # the fragment was swapped in; the page stayed
    assert page.locator("#replicas meter").count() >= 2
    page.screenshot(path=str(console.shots / "operator_fleet.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.locator("#fleet-refreshed").wait_for()
    page.screenshot(path=str(console.shots / "operator_fleet_phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")  # no sideways scrolling
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert all("status of 400" in error for error in page.errors)  # type: ignore[attr-defined]  # the refused grant


def test_an_operator_prices_a_tenant_s_recorded_traffic_on_other_hardware(
    console: Console, operator: str, page: Any
) -> None:
    _operator_sign_in(page, console, operator)
    page.get_by_role("link", name="Tenants").click()
    page.get_by_role("link", name="Acme Robotics").click()
    page.get_by_role("heading", name="Acme Robotics").wait_for()
    page.get_by_role("link", name="Capacity: what its recorded traffic would cost on other hardware").click()
    page.get_by_role("heading", name="Capacity: Acme Robotics").wait_for()
    assert page.locator("#current-deployment").inner_text().startswith(f"Today {MODELS[0]} runs on")
    assert page.get_by_label("Model").locator("option", has_text=MODELS[0]).count() == 1  # the module's chats
    assert page.get_by_role("checkbox", name=re.compile(r"^trn2\.48xlarge ")).is_checked()  # where it runs today
    page.get_by_role("checkbox", name=re.compile(r"^trn3-gen1-ultraserver ")).check()
    page.get_by_label("Assumed price of trn3-gen1-ultraserver (USD an hour)").fill("150")
    page.get_by_label("TP degrees").fill("4,8")
    page.get_by_label("Replicas").fill("1")
    page.get_by_role("button", name="Run the search").click()

    page.get_by_role("heading", name="Cheapest configuration per instance type").wait_for()
    assert page.locator("#workload").get_by_text(MODELS[0]).is_visible()  # the most used model by default
    assert int(page.locator("#workload-requests").inner_text().replace(",", "")) >= 3  # its chats, and its run
    assert "(as today)" in page.locator("#slo-ttft").inner_text()
    rows = page.locator("#best-per-instance tbody tr[data-instance]")
    assert rows.count() >= 1, page.locator("#best-per-instance").inner_text()
    cheapest = rows.first
    instance = cheapest.get_attribute("data-instance")
    assert instance in ("trn2.48xlarge", "trn3-gen1-ultraserver")
    cost = cheapest.locator("td[data-label='Cost per million output tokens']").inner_text()
    assert re.fullmatch(r"\$\d+\.\d{4}", cost), cost
    assert float(cost[1:]) > 0
    assert cheapest.locator("td[data-label='Max rate']").inner_text().endswith(" req/s")
    assert page.locator("#pareto tbody tr[data-instance]").count() >= 1
    assert page.get_by_label("Assumed price of trn3-gen1-ultraserver (USD an hour)").input_value() == "150"  # kept
    page.screenshot(path=str(console.shots / "operator_capacity.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]


def test_a_member_signed_in_is_sent_to_the_operator_sign_in(console: Console, operator: str, page: Any) -> None:
    from tests.platform.console.browser.served import sign_in

    sign_in(page, console, "owner")
    page.goto(f"{console.url}/console/operator/")
    assert "/console/operator/sign-in" in page.url
    page.get_by_role("heading", name="Operator sign-in").wait_for()
    page.get_by_label("Email").fill(console.emails["owner"])
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Wrong email or password.").wait_for()  # a member's password opens no operator session
    assert all("status of 401" in error for error in page.errors)  # type: ignore[attr-defined]  # the refusal only


_UNNAMED_CONTROLS = """() => [...document.querySelectorAll(
        'input:not([type=hidden]), select, textarea, button, a[href]')]
    .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
    .map(e => e.outerHTML)"""


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}], ids=str)
def test_operator_pages_fit_the_screen_and_name_every_control(
    console: Console, operator: str, page: Any, viewport: dict[str, int]
) -> None:
    _operator_sign_in(page, console, operator)
    page.set_viewport_size(viewport)
    page.get_by_role("link", name="Tenants").click()
    page.get_by_role("heading", name="Tenants").wait_for()
    tenant_path = page.get_by_role("link", name="Acme Robotics").get_attribute("href")
    for path, heading in [
        ("/console/operator/", "Tenants"),
        (tenant_path, "Acme Robotics"),
        (f"{tenant_path}/capacity", "Capacity: Acme Robotics"),
        ("/console/operator/rate-cards", "Rate cards"),
        ("/console/operator/fleet", "Fleet"),
        ("/console/operator/audit", "Operator audit log"),
    ]:
        page.goto(f"{console.url}{path}")
        page.get_by_role("heading", name=heading, exact=True).wait_for()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), path
        assert page.evaluate(_UNNAMED_CONTROLS) == [], path
        current = page.locator("nav[aria-label=Operator] a[aria-current=page]")
        assert current.count() == 1, path
    page.keyboard.press("Tab")  # the skip link first, then the brand, then the operator's navigation
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Tenants"
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Tenants").wait_for()
    assert page.errors == []  # type: ignore[attr-defined]


def test_the_fleet_page_goes_to_the_sign_in_when_its_session_ends(console: Console, operator: str, page: Any) -> None:
    _operator_sign_in(page, console, operator)
    page.locator("#fleet-refreshed").wait_for()
    page.context.clear_cookies()  # the session ends under the open page (signed out elsewhere, or expired)
    page.wait_for_url(re.compile(r"/console/operator/sign-in\?next=/console/operator/fleet$"), timeout=10_000)
    page.get_by_role("heading", name="Operator sign-in").wait_for()
    assert page.locator("#replicas").count() == 0  # the sign-in is the page, not swapped into the fleet's table


_FITS = "document.documentElement.scrollWidth <= window.innerWidth + 1"
_VIEWPORTS = [{"width": 1280, "height": 800}, {"width": 390, "height": 844}]


@pytest.mark.parametrize("viewport", _VIEWPORTS, ids=str)
def test_an_operator_creates_a_tenant_and_passes_on_the_owner_s_invitation_link(
    console: Console, operator: str, page: Any, viewport: dict[str, int]
) -> None:
    _operator_sign_in(page, console, operator)
    page.set_viewport_size(viewport)
    page.get_by_role("link", name="Tenants").click()
    page.get_by_role("heading", name="New tenant").wait_for()
    name = f"Globex {viewport['width']}"
    page.get_by_label("Tenant name").fill(name)
    page.get_by_label("Owner's e-mail").fill(f"hank{viewport['width']}@globex.example")
    page.get_by_role("button", name="Create tenant").click()
    page.get_by_role("heading", name=f"{name} is created").wait_for()
    link = page.get_by_role("textbox", name="Invitation link").input_value()
    assert link.startswith(f"{console.url}/console/invitations/")
    assert page.get_by_role("textbox", name="Owner API key").input_value().startswith("sy_")
    assert page.evaluate(_FITS)
    suffix = "" if viewport["width"] > 600 else "_phone"
    page.screenshot(path=str(console.shots / f"operator_tenant_created{suffix}.png"), full_page=True)

    page.get_by_role("link", name=f"Go to {name}").click()
    page.get_by_role("heading", name=name, exact=True).wait_for()
    assert page.locator("#members", has_text=f"hank{viewport['width']}@globex.example").is_visible()
    page.get_by_role("link", name="Switchyard").click()  # the brand leads to the operator's home
    page.get_by_role("heading", name="Tenants", exact=True).wait_for()
    assert page.url.endswith("/console/operator/")

    page.goto(link)  # the owner's link: the console's invitation page, to choose a password
    page.get_by_role("heading", name=f"Join {name}").wait_for()
    assert page.errors == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("viewport", _VIEWPORTS, ids=str)
def test_an_owner_filters_the_audit_log_and_exports_it(
    console: Console, page: Any, viewport: dict[str, int], tmp_path: Any
) -> None:
    from tests.platform.console.browser.served import sign_in

    sign_in(page, console, "owner")
    page.set_viewport_size(viewport)
    page.get_by_role("link", name="Audit log").click()
    page.get_by_role("heading", name="Audit log").wait_for()
    page.get_by_label("Action").select_option("agent.create")  # chosen from the actions the log holds
    by_key = page.locator("#audit-actor option", has_text="(api key)").inner_text()  # the tenant's one key
    assert re.fullmatch(r"owner \(sy_\w+_…\) \(api key\)", by_key)
    page.get_by_label("Actor").select_option(label=by_key)
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"/console/audit\?action=agent\.create&actor=key_\w+"))
    rows = page.locator("#audit-events tbody tr")
    assert rows.count() == 1
    assert "agent.create" in rows.first.inner_text()
    assert re.search(r"owner \(sy_\w+_…\)", rows.first.locator(".actor").inner_text())  # the key by name
    target = rows.first.get_by_role("link")
    assert target.get_attribute("href").startswith("/console/agents/agent_")  # type: ignore[union-attr]
    assert page.evaluate(_FITS)
    suffix = "" if viewport["width"] > 600 else "_phone"
    page.screenshot(path=str(console.shots / f"audit_filtered{suffix}.png"), full_page=True)

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    saved = tmp_path / "audit.csv"
    download.value.save_as(saved)
    lines = saved.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("created_at,action,actor_id,actor,actor_kind,target_type,target_id")
    assert len(lines) == 2  # the header and the one filtered row
    assert ",agent.create,key_" in lines[1]
    target.click()
    page.get_by_role("heading", name="support-bot").wait_for()  # the target's own page
    assert page.errors == []  # type: ignore[attr-defined]
