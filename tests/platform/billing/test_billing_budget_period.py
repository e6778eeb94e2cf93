"""A budget counts its whole period: one set mid-month starts at what its scope has spent since the 1st."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.db import TenantScope
from tests.platform.billing.factories import rated_usage, receipt

CHIP_HOUR = 3_600_000_000
"""One trn2.48xlarge chip-hour: 2.93625 USD, 2,936,250 micro-USD."""


async def test_a_budget_set_mid_month_starts_at_the_month_s_spend_so_far(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    scope = TenantScope(tenant.id)
    database = client.app.state.database
    now = datetime.now(UTC)
    # usage since the 1st, before any budget: one event rated, one still pending (not rated yet), and an agent's
    await rated_usage(database, scope, receipt(chip_us=CHIP_HOUR, occurred_at=now, api_key_id="key_a"))
    async with database.unit_of_work(scope) as session:
        await record_usage(session, scope=scope, event=receipt(chip_us=CHIP_HOUR, occurred_at=now, agent_id="agt_x"))

    made = await client.post("/v1/budgets", json={"limit_minor": 1_000}, headers=tenant.headers())
    assert made.status_code == 201, made.text
    assert (made.json()["spent"], made.json()["remaining"]) == ("5.872500", "4.127500")
    listed = (await client.get("/v1/budgets", headers=tenant.headers())).json()["data"]
    assert [b["spent"] for b in listed] == ["5.872500"]

    # a hard budget the month's spend already passes refuses the next request at admission
    small = await client.post("/v1/budgets", json={"limit_minor": 100}, headers=tenant.headers())
    assert small.json()["spent"] == "5.872500"  # setting it again keeps the spend
    chat = {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "x"}]}
    refused = await client.post("/v1/chat/completions", json=chat, headers=tenant.headers())
    assert refused.status_code == 402, refused.text
