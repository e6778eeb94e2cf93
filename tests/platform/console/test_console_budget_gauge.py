"""The overview's budget gauge reads the real share of the limit (past 100 % too) and marks a budget that is over."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import update

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import Budget
from tests.platform.console.factories import page_csrf, sign_in


async def _spend(console: Any, budget_id: str, micros: int) -> None:
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(update(Budget).where(Budget.id == budget_id).values(spent_micros=micros))


async def test_a_budget_at_300_per_cent_reads_300_and_is_marked_over(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    made = await console.post("/v1/budgets", json={"limit_minor": 1}, headers=tenant.headers())
    assert made.status_code == 201, made.text
    budget_id = made.json()["id"]
    await _spend(console, budget_id, 30_000)  # 0.03 USD of a 0.01 USD limit
    await sign_in(console, tenant.emails["admin"])
    page = (await console.get("/console/")).text
    gauge = re.search(rf'<li id="gauge-{budget_id}"[^>]*>(.*?)</li>', page, re.S)
    assert gauge, page
    assert "0.03 of 0.01 USD" in gauge.group(1)
    assert "300.0 %" in gauge.group(1)
    assert "100.0 %" not in gauge.group(1)
    assert 'class="over-budget"' in gauge.group(0)
    assert re.search(r'<meter[^>]*value="100"', gauge.group(1))  # the bar is full, not wider
    assert "over budget by 0.02 USD" in gauge.group(1)

    await _spend(console, budget_id, 5_000)  # half of it: no mark
    gauge = re.search(rf'<li id="gauge-{budget_id}"[^>]*>(.*?)</li>', (await console.get("/console/")).text, re.S)
    assert gauge
    assert "50.0 %" in gauge.group(1)
    assert "over-budget" not in gauge.group(0)


async def test_a_limit_past_what_a_budget_holds_is_a_form_error(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["admin"])
    csrf = await page_csrf(console, "/console/billing")
    for limit in ("1e999999", "1e16", "9" * 5_000, "1e-999999", "-0.001"):
        refused = await console.post(
            "/console/billing/budgets", data={"limit": limit, "currency": "USD", "csrf_token": csrf}
        )
        assert refused.status_code == 400, (limit[:20], refused.text[:300])
        assert 'class="error"' in refused.text
    assert (await console.get("/v1/budgets", headers=tenant.headers())).json()["data"] == []
