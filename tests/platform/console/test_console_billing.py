"""Console billing over HTTP: budgets set in major units, invoices and their CSV (the API's own), the rate card."""

from __future__ import annotations

from typing import Any

from tests.platform.billing.factories import make_invoice
from tests.platform.console.factories import page_csrf, sign_in


async def test_an_admin_sets_and_removes_a_budget_in_major_units(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/billing")
    for bad in ("twelve", "12.345", "-1"):
        refused = await console.post(
            "/console/billing/budgets", data={"limit": bad, "currency": "USD", "csrf_token": csrf}
        )
        assert refused.status_code == 400, bad
    made = await console.post(
        "/console/billing/budgets", data={"limit": "12.50", "currency": "usd", "hard": "on", "csrf_token": csrf}
    )
    assert made.status_code == 303, made.text
    budgets = (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"]
    assert [(b["limit_minor"], b["currency"], b["hard"]) for b in budgets] == [(1250, "USD", True)]
    overview = await console.get("/console/")
    assert "0.00 of 12.50 USD (hard)" in overview.text
    removed = await console.post(f"/console/billing/budgets/{budgets[0]['id']}/remove", data={"csrf_token": csrf})
    assert removed.status_code == 303
    assert (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"] == []


async def test_the_invoice_csv_is_the_api_s(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    invoice_id = await make_invoice(console, tenant)
    await sign_in(console, tenant.emails["admin"])
    page = await console.get("/console/billing")
    assert f"/console/billing/invoices/{invoice_id}/csv" in page.text
    assert "Rate card" in page.text
    csv = await console.get(f"/console/billing/invoices/{invoice_id}/csv")
    assert csv.status_code == 200
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.headers["content-disposition"] == f'attachment; filename="{invoice_id}.csv"'
    api = await console.get(f"/v1/invoices/{invoice_id}", params={"format": "csv"}, headers=tenant.headers())
    assert csv.text == api.text
    detail = await console.get(f"/console/billing/invoices/{invoice_id}")
    assert detail.status_code == 200


async def test_below_admin_the_overview_shows_no_budget(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    made = await console.post("/v1/budgets", json={"limit_minor": 777}, headers=tenant.headers())
    assert made.status_code == 201
    await sign_in(console, tenant.emails["developer"])
    overview = await console.get("/console/")
    assert "7.77" not in overview.text
    assert "Budgets are shown to admins and owners." in overview.text
    assert (await console.get("/console/billing")).status_code == 403


async def _agent(console: Any, tenant: Any, name: str = "budgeted-bot") -> str:
    body = {"name": name, "model": "meta-llama/Llama-3.1-8B-Instruct", "instructions": "Hi."}
    made = await console.post("/v1/agents", json=body, headers=tenant.headers())
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def test_budgets_of_an_agent_and_a_key_with_thresholds_are_set_edited_and_removed(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    agent_id = await _agent(console, tenant)
    key_id = (await console.get("/v1/api-keys", headers=tenant.headers())).json()["data"][0]["id"]
    await sign_in(console, tenant.emails["admin"])
    page = await console.get("/console/billing")
    assert f'<option value="agent:{agent_id}">Agent budgeted-bot</option>' in page.text  # chosen from a select
    assert f'value="api_key:{key_id}"' in page.text
    csrf = await page_csrf(console, "/console/billing")
    form = {"covers": f"agent:{agent_id}", "limit": "5", "currency": "USD", "csrf_token": csrf}
    made = await console.post("/console/billing/budgets", data={**form, "alert_thresholds": "50, 10"})
    assert made.status_code == 303, made.text
    keyed = await console.post(
        "/console/billing/budgets", data={**form, "covers": f"api_key:{key_id}", "hard": "on", "limit": "7.25"}
    )
    assert keyed.status_code == 303, keyed.text
    budgets = {b["scope"]: b for b in (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"]}
    agent_budget, key_budget = budgets["agent"], budgets["api_key"]
    assert (agent_budget["scope_id"], agent_budget["limit_minor"], agent_budget["hard"]) == (agent_id, 500, False)
    assert agent_budget["alert_thresholds"] == [10, 50]
    assert (key_budget["scope_id"], key_budget["limit_minor"], key_budget["hard"]) == (key_id, 725, True)
    assert key_budget["alert_thresholds"] == [50, 80, 100]  # left empty: the defaults
    listed = (await console.get("/console/billing")).text
    assert "Agent budgeted-bot" in listed
    assert "10, 50 %" in listed
    assert "alert only" in listed

    edit = await console.get(f"/console/billing/budgets/{agent_budget['id']}")
    assert edit.status_code == 200
    assert "Change the budget of Agent budgeted-bot" in edit.text
    assert f'name="covers" value="agent:{agent_id}"' in edit.text  # what it covers stays
    assert 'value="5.00"' in edit.text
    assert 'value="10, 50"' in edit.text
    changed = await console.post(
        "/console/billing/budgets",
        data={**form, "limit": "6", "alert_thresholds": "25 75 90", "hard": "on"},
    )
    assert changed.status_code == 303, changed.text
    after = (await console.get(f"/v1/budgets/{agent_budget['id']}", headers=tenant.headers())).json()
    assert (after["limit_minor"], after["hard"], after["alert_thresholds"]) == (600, True, [25, 75, 90])

    removed = await console.post(f"/console/billing/budgets/{agent_budget['id']}/remove", data={"csrf_token": csrf})
    assert removed.status_code == 303
    left = (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"]
    assert [b["id"] for b in left] == [key_budget["id"]]


async def test_a_refused_budget_form_says_why_on_the_page_and_changes_nothing(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    agent_id, their_agent = await _agent(console, tenant), await _agent(console, other)
    made = await console.post(
        "/v1/budgets",
        json={"limit_minor": 900, "scope": "agent", "scope_id": agent_id, "alert_thresholds": [20]},
        headers=tenant.headers(),
    )
    assert made.status_code == 201, made.text
    before = (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"]
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/billing")
    audit_before = (await console.get("/v1/audit-log", headers=tenant.headers())).json()["data"]
    form = {"covers": f"agent:{agent_id}", "limit": "1", "currency": "USD", "csrf_token": csrf}
    for fields, reason in [
        ({"alert_thresholds": "10, 10"}, "distinct"),
        ({"alert_thresholds": "0"}, "alert thresholds"),
        ({"alert_thresholds": "150"}, "alert thresholds"),
        ({"alert_thresholds": "1 2 3 4 5 6"}, "alert thresholds"),
        ({"alert_thresholds": "ten"}, "whole percentages"),
        ({"alert_thresholds": "12.5"}, "whole percentages"),
        ({"covers": f"agent:{their_agent}"}, "not an agent of this tenant"),
        ({"covers": "agent:"}, "scope_id is required"),
        ({"covers": "everything"}, "covers"),
        ({"limit": "NaN"}, "the limit"),
    ]:
        refused = await console.post("/console/billing/budgets", data={**form, **fields})
        assert refused.status_code == 400, (fields, refused.text)
        assert 'role="alert"' in refused.text
        assert reason in refused.text, (fields, refused.text)
        assert 'id="budget-form"' in refused.text  # the form again, with what was typed
        assert fields.get("alert_thresholds", "1") in refused.text
    assert (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"] == before
    assert (await console.get("/v1/audit-log", headers=tenant.headers())).json()["data"] == audit_before
    assert (await console.get("/v1/budgets", headers=other.headers())).json()["data"] == []


async def test_the_overview_shows_each_budget_s_gauge_and_this_month_s_alerts(
    console: Any, make_console_tenant: Any
) -> None:
    from switchyard.platform.billing import budgets as holds
    from switchyard.platform.db import TenantScope

    tenant = await make_console_tenant()
    agent_id = await _agent(console, tenant, "gauged-bot")
    for body in (
        {"limit_minor": 10_000},
        {"limit_minor": 1000, "scope": "agent", "scope_id": agent_id, "hard": False, "alert_thresholds": [10, 50]},
    ):
        assert (await console.post("/v1/budgets", json=body, headers=tenant.headers())).status_code == 201
    scope = TenantScope(tenant.id)
    held = await holds.reserve(  # what a request of the agent does: 1.468125 USD, 14.7 % of the agent's 10.00
        console.app.state.database,
        scope=scope,
        api_key_id=None,
        agent_id=agent_id,
        model="llama-3.1-8b",
        instance_type="trn2.48xlarge",
        estimated_chip_us=1_800_000_000,
    )
    await holds.settle(console.app.state.database, scope=scope, reservation_id=held.id, actual_chip_us=1_800_000_000)
    await sign_in(console, tenant.emails["admin"])
    overview = (await console.get("/console/")).text
    assert "Agent gauged-bot: 1.47 of 10.00 USD" in overview
    assert 'aria-label="Budget used, per cent: Agent gauged-bot">14.7 %' in overview
    assert "The whole tenant: 1.47 of 100.00 USD (hard)" in overview
    alerts = overview[overview.index('id="budget-alerts"') :]
    assert "<td>Agent gauged-bot</td><td>10 %</td><td>1.47 USD</td>" in alerts
    assert "50 %</td>" not in alerts  # the tenant's 50 % and the agent's 50 % are not reached

    console.cookies.clear()
    await sign_in(console, tenant.emails["developer"])
    below = (await console.get("/console/")).text
    assert "Budget alerts this month" not in below
    assert "gauged-bot" not in below
