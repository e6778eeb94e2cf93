"""The console in a real browser: Debian's Chromium driven by Playwright against the app served on 127.0.0.1
(the fixtures are in this directory's ``conftest.py``)."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from switchyard.platform.db import UNSCOPED, Database
from tests.platform.console.browser.served import MODELS, Console, sign_in
from tests.platform.console.factories import PASSWORD

pytestmark = pytest.mark.slow


def test_sign_in_shows_the_overview_with_usage_budget_and_runs(console: Console, page: Any) -> None:
    sign_in(page, console, "owner")
    assert page.get_by_text(f"{console.emails['owner']} · owner · Acme Robotics").is_visible()
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["switchyard_console"]
    assert session["httpOnly"]
    assert session["secure"]
    assert session["sameSite"] == "Lax"
    assert page.evaluate("document.cookie") == ""  # no script can read the session (or the CSRF cookie)
    chip_hours = float(page.locator("#chip-hours").inner_text().replace(",", ""))
    assert chip_hours > 0
    page.locator("#usage-chart canvas").first.wait_for()  # uPlot drew the chart
    assert page.locator("#usage-chart .u-legend").inner_text().count("Llama") == 2  # stacked by model
    meter = page.get_by_role("meter", name="Budget used, per cent")
    assert meter.count() == 1
    assert "support-bot" in page.locator("#runs-h + .scroll table").inner_text()
    page.screenshot(path=str(console.shots / "overview.png"), full_page=True)
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]


def test_create_an_agent_and_edit_it_into_a_new_version(console: Console, page: Any) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Agents").click()
    page.get_by_role("link", name="New agent").click()
    page.get_by_label("Name", exact=True).fill("triage-bot")
    page.get_by_label("Model", exact=True).select_option(MODELS[1])
    page.get_by_label("Instructions").fill("Sort incoming tickets by urgency.")
    page.get_by_label("Largest answer (max_tokens)").fill("256")
    page.get_by_role("button", name="Create agent").click()
    page.get_by_role("heading", name="triage-bot v1").wait_for()
    agent_id = page.locator("dl.facts code").inner_text()
    page.get_by_role("link", name="Edit (makes version 2)").click()
    page.get_by_label("Instructions").fill("Sort incoming tickets by urgency, then by customer tier.")
    page.get_by_role("button", name="Save as version 2").click()
    page.get_by_role("heading", name="triage-bot v2").wait_for()
    assert page.locator("table tbody tr").count() == 2  # both versions listed
    page.screenshot(path=str(console.shots / "agent.png"), full_page=True)
    page.get_by_role("link", name="changes from v1").click()
    diff = page.get_by_role("table", name="Changes from version 1 to version 2")
    diff.wait_for()
    assert diff.locator("tbody th").all_inner_texts() == ["instructions"]  # the field changed, nothing else
    assert "then by customer tier" in diff.locator("td.after").inner_text()
    assert "then by customer tier" not in diff.locator("td.before").inner_text()
    page.get_by_role("link", name="Back to triage-bot").click()
    with console.api() as api:  # the API sees what the console made: the console is a layer over the same service
        agent = api.get(f"/v1/agents/{agent_id}").json()
    assert agent["version"] == 2
    assert agent["instructions"] == "Sort incoming tickets by urgency, then by customer tier."
    assert agent["model_params"]["max_tokens"] == 256
    page.get_by_role("link", name="Delete triage-bot…").click()  # asks first
    page.get_by_role("button", name="Delete triage-bot").click()
    page.get_by_role("heading", name="Agents").wait_for()
    assert page.get_by_role("link", name="triage-bot").count() == 0
    with console.api() as api:
        assert api.get(f"/v1/agents/{agent_id}").status_code == 404
    assert page.errors == []  # type: ignore[attr-defined]


def test_create_a_key_see_its_secret_once_use_it_and_revoke_it(console: Console, page: Any) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("ci-pipeline")
    page.get_by_label("Role").select_option("developer")
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("Key", exact=True).input_value()
    assert re.fullmatch(r"sy_[0-9a-f]{12}_\S{43}", secret)
    page.screenshot(path=str(console.shots / "key-created.png"), full_page=True)
    with console.api(secret) as api:
        assert api.get("/v1/agents").status_code == 200
    page.goto(f"{console.url}/console/keys")
    assert secret not in page.content()  # shown once
    row = page.locator("tr", has_text="ci-pipeline")
    row.get_by_role("link", name="Revoke key ci-pipeline").click()
    page.get_by_role("button", name="Revoke “ci-pipeline”").click()  # after a confirmation page
    page.locator("tr", has_text="ci-pipeline").get_by_text("revoked").wait_for()
    with console.api(secret) as api:
        assert api.get("/v1/agents").status_code == 401
    page.screenshot(path=str(console.shots / "keys.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]


def test_a_viewer_is_refused_by_the_server_not_only_by_hidden_buttons(console: Console, page: Any) -> None:
    sign_in(page, console, "viewer")
    page.get_by_role("link", name="Agents").click()
    assert page.get_by_role("link", name="New agent").count() == 0
    answer = page.goto(f"{console.url}/console/agents/new")
    assert answer is not None
    assert answer.status == 403
    page.get_by_role("heading", name="Not allowed").wait_for()
    page.screenshot(path=str(console.shots / "forbidden.png"), full_page=True)
    csrf = page.locator("form.who input[name=csrf_token]").input_value()
    forged = page.request.post(  # the viewer's own session and token, posting what no button offers
        f"{console.url}/console/agents",
        form={"csrf_token": csrf, "name": "sneaky", "model": MODELS[0], "instructions": ""},
    )
    assert forged.status == 403
    keys = page.request.post(f"{console.url}/console/keys", form={"csrf_token": csrf, "name": "x", "role": "viewer"})
    assert keys.status == 403
    assert page.goto(f"{console.url}/console/keys").status == 403  # type: ignore[union-attr]
    with console.api() as api:
        assert "sneaky" not in api.get("/v1/agents").text


def test_every_page_renders_with_the_network_cut_off_except_127_0_0_1(console: Console, page: Any) -> None:
    sign_in(page, console, "owner")
    for path, heading in [("/console/", "Overview"), ("/console/agents", "Agents"), ("/console/keys", "API keys")]:
        page.goto(f"{console.url}{path}")
        page.get_by_role("heading", name=heading, exact=True).wait_for()
        assert page.evaluate("typeof window.htmx") == "object"  # the vendored script ran
        styled = page.evaluate("getComputedStyle(document.querySelector('header.top')).display")
        assert styled == "flex"  # the console's stylesheet applied
    page.goto(f"{console.url}/console/")
    page.locator("#usage-chart canvas").first.wait_for()
    assert page.evaluate("typeof window.uPlot") == "function"
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.reload()
    page.locator("#usage-chart canvas").first.wait_for()
    page.screenshot(path=str(console.shots / "overview-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")  # no sideways scrolling
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]


def test_filter_the_runs_and_open_a_run_trace(console: Console, page: Any) -> None:
    sign_in(page, console, "owner")
    page.get_by_role("link", name="Runs").click()
    page.get_by_label("Agent").select_option(label="support-bot")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("No runs match.").wait_for()  # the one run completed
    page.get_by_label("Status").select_option("completed")
    page.get_by_label("Started").select_option("day")
    page.get_by_role("button", name="Filter").click()
    page.locator("table a").first.click()
    page.get_by_role("heading", name="Timeline").wait_for()
    assert page.locator("svg.timeline rect.bar.queue").count() == 1
    assert page.locator("svg.timeline rect.bar.model_call").count() >= 1
    model_row = page.locator("#steps tbody tr", has_text="model_call").first
    assert re.search(r"\d+ / \d+", model_row.inner_text())  # tokens in / out of the model call
    chip_us = int(model_row.locator("td").nth(5).inner_text().replace(",", ""))
    assert model_row.locator("td").last.inner_text().startswith(f"{MODELS[0]}/")  # the replica that served it
    with console.api() as api:
        listed = api.get("/v1/agents").json()["data"]
        agent_id = next(a["id"] for a in listed if a["name"] == "support-bot")
        assert agent_id in page.content()
    assert chip_us > 0
    page.screenshot(path=str(console.shots / "trace.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]


def test_invite_a_member_who_signs_in_with_a_lower_role_and_is_refused(console: Console, page: Any) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="Members").click()
    page.get_by_label("Email").fill("dev@acme.example")
    page.get_by_label("Role", exact=True).select_option("developer")
    page.get_by_role("button", name="Invite").click()
    link = page.get_by_label("Invitation link").input_value()
    page.screenshot(path=str(console.shots / "members.png"), full_page=True)
    page.get_by_role("button", name="Sign out").click()
    page.get_by_text("You are signed out.").wait_for()
    console.emails["developer"] = "dev@acme.example"
    page.goto(link)  # the invited person follows the link and chooses a password
    page.get_by_label("New password").fill(PASSWORD)
    page.get_by_label("New password").press("Enter")
    page.get_by_text("dev@acme.example · developer · Acme Robotics").wait_for()
    page.get_by_role("link", name="Members").click()
    assert page.get_by_role("button", name="Invite").count() == 0  # nothing offered ...
    csrf = page.locator("form.who input[name=csrf_token]").input_value()
    forged = page.request.post(  # ... and what is forged anyway is refused by the server
        f"{console.url}/console/members", form={"csrf_token": csrf, "email": "evil@acme.example", "role": "owner"}
    )
    assert forged.status == 403
    assert page.goto(f"{console.url}/console/keys").status == 403  # type: ignore[union-attr]
    with console.api() as api:
        assert "evil@acme.example" not in api.get("/v1/members").text
    unexpected = [e for e in page.errors if "status of 403" not in e]  # type: ignore[attr-defined]
    assert unexpected == []  # the refused page load itself is the only error


async def _rate_everything(settings_url: str) -> None:
    from switchyard.platform.billing.ledger import rate_events

    database = Database(settings_url)
    try:
        while True:
            async with database.unit_of_work(UNSCOPED) as session:
                if not (await rate_events(session)).rated:
                    return
    finally:
        await database.dispose()


def test_set_a_budget_watch_the_gauge_move_with_usage_and_download_the_invoice(console: Console, page: Any) -> None:
    sign_in(page, console, "owner")
    page.get_by_role("link", name="Billing").click()
    page.get_by_label("Monthly limit for the tenant").fill("0.50")
    page.get_by_role("button", name="Set budget").click()
    # the new limit's own cell: "50" alone is in the old page too (a threshold, an amount spent), and leaving
    # before the form's answer came back would let that answer replace the overview
    page.locator("#budgets td", has_text=re.compile(r"^0\.50 USD$")).wait_for()
    page.get_by_role("link", name="Overview").click()  # a boosted navigation: the chart draws there too
    page.locator("#usage-chart canvas").first.wait_for()
    meter = page.get_by_role("meter", name="Budget used, per cent")
    before_gauge = float(meter.get_attribute("value") or "0")
    before_hours = float(page.locator("#chip-hours").inner_text().replace(",", ""))
    with console.api() as api:
        for _ in range(3):
            body = {"model": MODELS[1], "messages": [{"role": "user", "content": "Write a long status report."}]}
            assert api.post("/v1/chat/completions", json={**body, "max_tokens": 400}).status_code == 200
    page.goto(f"{console.url}/console/")
    page.get_by_role("heading", name="Overview").wait_for()
    after_gauge = float(page.get_by_role("meter", name="Budget used, per cent").get_attribute("value") or "0")
    after_hours = float(page.locator("#chip-hours").inner_text().replace(",", ""))
    assert after_hours > before_hours
    assert after_gauge > before_gauge
    page.locator("#usage-chart canvas").first.wait_for()
    page.screenshot(path=str(console.shots / "overview-budget.png"), full_page=True)
    with ThreadPoolExecutor(1) as pool:  # what the billing job does (off this thread: Playwright's loop runs here)
        pool.submit(asyncio.run, _rate_everything(console.app.state.settings.database_url)).result()
    page.get_by_role("link", name="Billing").click()
    with page.expect_download() as download:
        page.locator("#invoices").get_by_role("link", name=re.compile("^CSV")).first.click()
    text = Path(download.value.path()).read_text()
    assert text.splitlines()[0].startswith("invoice_id,period,status,kind,description")
    assert "usage" in text
    page.screenshot(path=str(console.shots / "billing.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]
    with console.api() as api:  # later scenarios run unbudgeted
        for budget in api.get("/v1/budgets").json()["data"]:
            assert api.delete(f"/v1/budgets/{budget['id']}").status_code == 200
