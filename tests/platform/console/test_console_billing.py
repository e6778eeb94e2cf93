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
