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
    from switchyard.platform.db import TenantScope
    from tests.platform.billing.factories import rated_usage, receipt

    tenant = await make_tenant()
    usage = receipt(chip_us=3_600_000_000, occurred_at=datetime.now(UTC))  # 2.94 USD this month
    await rated_usage(client.app.state.database, TenantScope(tenant.id), usage)
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
    assert draft["total_minor"] == sum(line["amount_minor"] for line in draft["lines"]) == 44

    assert await finalize_due(client.app.state.database, now=JAN_2)
    assert await finalize_due(client.app.state.database, now=JAN_2) == []  # a second run changes nothing
    (final,) = await _invoices(client, tenant)
    assert final["status"] == "finalized"
    kinds = [line["kind"] for line in final["lines"]]
    assert kinds == ["usage", "credit"]
    assert final["total_minor"] == 294 - 250

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


async def _grant(database: Any, scope: Any, amount_minor: int, reason: str) -> None:
    from switchyard.platform.auth.principal import Actor
    from switchyard.platform.billing.credits import grant_credit
    from switchyard.platform.billing.schemas import CreditGrant
    from switchyard.platform.db import UNSCOPED

    async with database.unit_of_work(UNSCOPED) as session:
        data = CreditGrant(amount_minor=amount_minor, currency="USD", reason=reason)
        await grant_credit(session, tenant_id=scope.tenant_id, actor=Actor("op", None), data=data)


async def _open_credits(database: Any, scope: Any) -> list[tuple[int, str]]:
    from switchyard.platform.billing.credits import list_credits
    from switchyard.platform.db import UNSCOPED

    async with database.unit_of_work(UNSCOPED) as session:
        listed = await list_credits(session, tenant_id=scope.tenant_id)
    return [(credit.amount_minor, credit.reason) for credit in listed if not credit.applied]


async def test_a_credit_larger_than_the_usage_never_makes_an_invoice_negative(database: Any, new_tenant: Any) -> None:
    """A credit covers at most what the invoice adds up to; the rest stays open for the next invoices, so the
    credits granted always equal the credit lines applied plus the credits still open."""
    from datetime import timedelta

    from sqlalchemy import select

    from switchyard.platform.billing.invoices import compute_lines
    from switchyard.platform.billing.periods import month_start, next_month
    from switchyard.platform.db import TenantScope
    from switchyard.platform.models import Invoice
    from tests.platform.billing.factories import rated_usage, receipt

    # this month and the next (granting a credit opens this month's draft, so the test's months are real ones)
    nov = month_start(datetime.now(UTC))
    dec = next_month(nov)
    scope = await new_tenant()
    await rated_usage(database, scope, receipt(chip_us=3_600_000_000, occurred_at=nov + timedelta(days=3)))  # 2.94
    await _grant(database, scope, 1_000, "outage")

    async def invoices() -> list[tuple[Invoice, list[Any]]]:
        async with database.unit_of_work(TenantScope(scope.tenant_id)) as session:
            rows = list((await session.execute(select(Invoice).order_by(Invoice.period_start))).scalars())
            return [(row, await compute_lines(session, invoice=row)) for row in rows]

    [(_draft, lines)] = await invoices()
    assert [(line.kind, line.amount_minor) for line in lines] == [("usage", 294), ("credit", -294)]
    assert sum(line.amount_minor for line in lines) == 0

    assert await finalize_due(database, now=dec + timedelta(days=1))
    [(final, lines)] = await invoices()
    assert (final.status, final.total_minor) == ("finalized", 0)
    assert [(line.kind, line.amount_minor) for line in lines] == [("usage", 294), ("credit", -294)]
    assert await _open_credits(database, scope) == [(706, "Unused remainder of outage")]

    # next month: 2.94 more usage takes 2.94 of the remainder
    await rated_usage(database, scope, receipt(chip_us=3_600_000_000, occurred_at=dec + timedelta(days=3)))
    assert await finalize_due(database, now=next_month(dec) + timedelta(days=1))
    await _grant(database, scope, 50, "goodwill")
    [_, (december, lines)] = await invoices()
    assert (december.status, december.total_minor) == ("finalized", 0)
    assert [line.amount_minor for line in lines] == [294, -294]
    assert await _open_credits(database, scope) == [(412, "Unused remainder of outage"), (50, "goodwill")]
    granted_minor, applied_minor = 1_050, 294 + 294
    assert applied_minor + sum(amount for amount, _ in await _open_credits(database, scope)) == granted_minor


async def test_a_credit_with_no_usage_to_cover_stays_open(database: Any, new_tenant: Any) -> None:
    from sqlalchemy import select

    from switchyard.platform.billing.invoices import compute_lines
    from switchyard.platform.db import TenantScope
    from switchyard.platform.models import Invoice

    scope = await new_tenant()
    await _grant(database, scope, 994, "welcome")
    async with database.unit_of_work(TenantScope(scope.tenant_id)) as session:
        [draft] = (await session.execute(select(Invoice))).scalars()
        lines = await compute_lines(session, invoice=draft)
    assert sum(line.amount_minor for line in lines) == 0  # was -9.94: a negative provisional total
    assert await _open_credits(database, scope) == [(994, "welcome")]
