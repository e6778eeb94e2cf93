"""The usage page and the overview's money: usage over chosen UTC days by agent, workflow, key or model, by name,
in chip-hours for every member and in money for admins (rated usage at its price, usage not rated yet at the card
that applies now), a refused range said on the page, and a quickstart where there is nothing to show."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from switchyard.platform.billing.costs import Price
from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.billing.periods import month_start
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.models import UsageEvent, utc_now
from tests.platform.billing.factories import rated_usage, receipt
from tests.platform.console.factories import sign_in

HOUR_US = 3_600_000_000


async def _agent(console: Any, tenant: Any, name: str) -> str:
    body = {"name": name, "model": "meta-llama/Llama-3.1-8B-Instruct", "instructions": "Hi."}
    made = await console.post("/v1/agents", json=body, headers=tenant.headers())
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def _unrated(console: Any, tenant_id: str, *events: Any) -> None:
    async with console.app.state.database.unit_of_work(TenantScope(tenant_id)) as session:
        for event in events:
            await record_usage(session, scope=TenantScope(tenant_id), event=event)


def _cell(page: str, row_label: str) -> list[str]:
    """The cells of the usage table's row headed ``row_label``."""
    row = re.search(rf"<tr><th scope=\"row\">{re.escape(row_label)}.*?</tr>", page, re.S)
    assert row, page
    return re.findall(r'<td class="num">([^<]*)</td>', row.group(0))


async def test_an_admin_sees_usage_by_agent_name_in_chip_hours_and_money(
    console: Any, make_console_tenant: Any
) -> None:
    tenant = await make_console_tenant()
    scope = TenantScope(tenant.id)
    bot = await _agent(console, tenant, "support-bot")
    now = utc_now()
    await rated_usage(console.app.state.database, scope, receipt(chip_us=HOUR_US, agent_id=bot, occurred_at=now))
    await _unrated(console, tenant.id, receipt(chip_us=HOUR_US // 2, agent_id=bot, occurred_at=now))
    await _unrated(console, tenant.id, receipt(chip_us=HOUR_US // 4, occurred_at=now))  # no agent
    async with console.app.state.database.unit_of_work(UNSCOPED) as session:
        rated = (await session.execute(select(UsageEvent).where(UsageEvent.price_per_chip_hour.is_not(None)))).scalars()  # type: ignore[union-attr]
        price = Price(*next((e.price_per_chip_hour, e.currency) for e in rated))  # type: ignore[misc]

    await sign_in(console, tenant.emails["admin"])
    page = (await console.get("/console/usage?group=agent_id")).text
    bot_cost = price.of(HOUR_US) + price.of(HOUR_US // 2)  # the unrated half at the card that applies now
    assert _cell(page, "support-bot") == ["2", "20", "10", "1.500000", f"{bot_cost / 1e6:,.2f} USD"]
    assert _cell(page, '<span class="hint">none</span>')[3] == "0.250000"
    total = bot_cost + price.of(HOUR_US // 4)
    assert re.search(rf'id="usage-cost">{re.escape(f"{total / 1e6:,.2f}")} USD<', page)

    overview = (await console.get("/console/")).text
    assert re.search(rf'id="month-cost">{re.escape(f"{total / 1e6:,.2f}")} USD<', overview)


async def test_below_admin_usage_is_chip_time_only(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await _unrated(console, tenant.id, receipt(chip_us=HOUR_US, occurred_at=utc_now()))
    await sign_in(console, tenant.emails["viewer"])
    page = await console.get("/console/usage?group=model")
    assert page.status_code == 200
    assert _cell(page.text, "llama-3.1-8b")[3] == "1.000000"
    assert "usage-cost" not in page.text
    assert "Money is shown to admins" in page.text
    assert "month-cost" not in (await console.get("/console/")).text


async def test_the_days_shown_are_the_ones_chosen(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    now = utc_now()
    last_month = month_start(now) - timedelta(days=1)
    await _unrated(
        console,
        tenant.id,
        receipt(chip_us=HOUR_US, occurred_at=now, model="this-month"),
        receipt(chip_us=HOUR_US, occurred_at=last_month, model="last-month"),
    )
    await sign_in(console, tenant.emails["viewer"])
    this_month = (await console.get("/console/usage?group=model")).text
    assert "this-month" in this_month
    assert "last-month" not in this_month
    before = (await console.get("/console/usage?group=model&since=last_month")).text
    assert "last-month" in before
    assert "this-month" not in before
    day = last_month.date().isoformat()
    chosen = (await console.get(f"/console/usage?group=model&first={day}&last={day}")).text
    assert _cell(chosen, "last-month")[3] == "1.000000"
    assert "this-month" not in chosen


async def test_a_refused_range_says_why_and_shows_this_month(console: Any, make_console_tenant: Any) -> None:
    tenant = await make_console_tenant()
    await sign_in(console, tenant.emails["viewer"])
    for query in (
        "first=2026-13-01&last=2026-12-01",
        "first=2026-12-05&last=2026-12-01",
        "first=2020-01-01&last=2026-01-01",
        "first=2026-12-01",
    ):
        refused = await console.get(f"/console/usage?{query}")
        assert refused.status_code == 400, query
        assert 'role="alert">Not shown:' in refused.text
        assert "Showing this month instead" in refused.text


async def test_an_empty_tenant_is_told_how_to_start_and_sees_no_other_tenants_usage(
    console: Any, make_console_tenant: Any
) -> None:
    busy, empty = await make_console_tenant(), await make_console_tenant()
    await _unrated(console, busy.id, receipt(chip_us=HOUR_US, occurred_at=utc_now(), model="busy-model"))
    await sign_in(console, empty.emails["admin"])
    for path in ("/console/usage", "/console/"):
        page = (await console.get(path)).text
        assert 'id="quickstart-h">Start here' in page
        assert 'value="https://switchyard.test/v1"' in page
        assert "busy-model" not in page
