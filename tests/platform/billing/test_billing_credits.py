"""Operator credits: a negative line on the tenant's next finalized invoice, applied exactly once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from switchyard.platform.billing.invoices import finalize_due

JAN_2 = datetime(2027, 1, 2, tzinfo=UTC)


async def _invoices(client: Any, tenant: Any) -> list[dict[str, Any]]:
    page = (await client.get("/v1/invoices?order=asc", headers=tenant.headers())).json()
    return list(page["data"])


async def test_credit_shows_on_the_draft_and_is_applied_once(
    client: Any, make_tenant: Any, operator_headers: dict[str, str]
) -> None:
    tenant = await make_tenant()
    chat = {"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "x"}]}
    assert (await client.post("/v1/chat/completions", json=chat, headers=tenant.headers())).status_code == 200
    granted = await client.post(
        f"/v1/admin/tenants/{tenant.id}/credits",
        json={"amount_minor": 250, "currency": "USD", "reason": "outage on 2026-11-30"},
        headers=operator_headers,
    )
    assert granted.status_code == 201, granted.text
    assert granted.json()["applied"] is False

    (draft,) = await _invoices(client, tenant)
    credit_lines = [line for line in draft["lines"] if line["kind"] == "credit"]
    assert [(c["amount_minor"], c["description"]) for c in credit_lines] == [(-250, "Credit: outage on 2026-11-30")]
    assert draft["total_minor"] == sum(line["amount_minor"] for line in draft["lines"])

    await client.app.state.gateway.drain()
    from switchyard.platform.billing.ledger import rate_events
    from switchyard.platform.db import UNSCOPED

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        await rate_events(session)
    assert await finalize_due(client.app.state.database, now=JAN_2)
    assert await finalize_due(client.app.state.database, now=JAN_2) == []  # a second run changes nothing
    (final,) = await _invoices(client, tenant)
    assert final["status"] == "finalized"
    kinds = [line["kind"] for line in final["lines"]]
    assert kinds == ["usage", "credit"]
    assert final["total_minor"] == final["lines"][0]["amount_minor"] - 250

    credits = (await client.get(f"/v1/admin/tenants/{tenant.id}/credits", headers=operator_headers)).json()
    assert [c["applied"] for c in credits] == [True]
    audit = (await client.get("/v1/audit-log?action=credit.grant", headers=tenant.headers())).json()["data"]
    assert len(audit) == 1


async def test_bad_credits_are_refused(client: Any, make_tenant: Any, operator_headers: dict[str, str]) -> None:
    tenant = await make_tenant()
    for body in ({"amount_minor": 0, "reason": "x"}, {"amount_minor": 5, "reason": ""}, {"amount_minor": 5}):
        response = await client.post(f"/v1/admin/tenants/{tenant.id}/credits", json=body, headers=operator_headers)
        assert response.status_code == 400, body
    missing = await client.post(
        "/v1/admin/tenants/ten_nope/credits", json={"amount_minor": 5, "reason": "x"}, headers=operator_headers
    )
    assert missing.status_code == 404
    assert (await client.get(f"/v1/admin/tenants/{tenant.id}/credits", headers=operator_headers)).json() == []
