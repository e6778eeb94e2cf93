"""Invoices: lines per (instance type, model) rounded once, finalize after grace, immutable, late usage adjusts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select

from switchyard.platform.billing.invoices import compute_lines, finalize_due
from switchyard.platform.billing.rates import create_rate_card
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import Invoice, InvoiceLine, UsageEvent
from tests.platform.billing.factories import rated_usage, receipt

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


async def invoices(database: Database, scope: TenantScope) -> list[Invoice]:
    async with database.unit_of_work(scope) as session:
        return list((await session.execute(select(Invoice).order_by(Invoice.period_start))).scalars())


async def lines_of(database: Database, invoice: Invoice) -> list[Any]:
    async with database.unit_of_work(TenantScope(invoice.tenant_id)) as session:
        return await compute_lines(session, invoice=invoice)


async def test_draft_lines_round_once_per_line(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    # 1,000 events of 1,000 chip-µs at 2.93625/chip-hour: each is 0.0000816 cents; the line is 0.0816 cents.
    events = [receipt(chip_us=1_000, occurred_at=NOV + timedelta(minutes=i)) for i in range(1_000)]
    events.append(receipt(chip_us=7_200_000_000, model="other", occurred_at=NOV + timedelta(days=3)))
    await rated_usage(database, scope, *events)
    (draft,) = await invoices(database, scope)
    assert (draft.status, draft.period_start, draft.period_end) == ("draft", NOV, DEC)
    lines = await lines_of(database, draft)
    assert [(line.model, line.chip_us, line.event_count, line.amount_minor) for line in lines] == [
        ("llama-3.1-8b", 1_000_000, 1_000, 0),  # 0.0816 cents rounds to 0, once
        ("other", 7_200_000_000, 1, 587),  # 2 chip-hours * 2.93625 = 5.8725 -> 5.87
    ]
    assert lines[1].unit_price == Decimal("2.936250000000000")


async def test_finalize_after_grace_then_late_usage_adjusts_next_invoice(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    await rated_usage(database, scope, receipt(chip_us=3_600_000_000, occurred_at=NOV + timedelta(days=29)))
    assert await finalize_due(database, now=DEC + timedelta(hours=23)) == []  # still in the grace period
    finalized = await finalize_due(database, now=DEC + timedelta(days=1))
    assert len(finalized) == 1
    assert await finalize_due(database, now=DEC + timedelta(days=2)) == []  # idempotent
    (nov,) = await invoices(database, scope)
    assert (nov.status, nov.total_minor) == ("finalized", 294)  # 2.93625 -> 2.94
    stored = await lines_of(database, nov)
    assert [(line.kind, line.amount_minor) for line in stored] == [("usage", 294)]

    # A November receipt arrives after November was finalized, plus December usage at a new price.
    async with database.unit_of_work(UNSCOPED) as session:
        await create_rate_card(
            session, instance_type="trn2.48xlarge", price_per_chip_hour=Decimal("3"), effective_from=DEC
        )
    late = receipt(chip_us=1_800_000_000, occurred_at=NOV + timedelta(days=29, hours=1))
    await rated_usage(database, scope, late, receipt(chip_us=3_600_000_000, occurred_at=DEC + timedelta(days=2)))
    nov_again, dec = await invoices(database, scope)
    assert (nov_again.total_minor, nov_again.finalized_at) == (nov.total_minor, nov.finalized_at)
    assert [(line.kind, line.amount_minor) for line in await lines_of(database, nov_again)] == [("usage", 294)]
    assert dec.status == "draft"
    draft_lines = await lines_of(database, dec)
    assert [(line.kind, line.amount_minor) for line in draft_lines] == [("usage", 300), ("adjustment", 147)]
    assert draft_lines[1].description.startswith("Late usage from 2026-11")

    await finalize_due(database, now=datetime(2027, 1, 2, tzinfo=UTC))
    _, dec = await invoices(database, scope)
    assert dec.total_minor == 447
    async with database.unit_of_work(scope) as session:
        stored_total = (await session.execute(select(func.sum(InvoiceLine.amount_minor)))).scalar_one()
        unbilled = (await session.execute(select(UsageEvent).where(UsageEvent.invoice_line_id.is_(None)))).all()
    assert stored_total == 294 + 447
    assert unbilled == []


async def test_an_invoice_that_cannot_finalize_holds_up_only_its_tenant(
    database: Database, new_tenant: Any, caplog: Any
) -> None:
    good, bad = await new_tenant(), await new_tenant()
    async with database.unit_of_work(UNSCOPED) as session:
        await create_rate_card(
            session,
            instance_type="inf2.xlarge",
            price_per_chip_hour=Decimal("100"),
            currency="JPY",
            effective_from=NOV,
        )
    await rated_usage(database, good, receipt(occurred_at=NOV + timedelta(days=1)))
    await rated_usage(
        database,
        bad,
        receipt(occurred_at=NOV + timedelta(days=1)),
        receipt(occurred_at=NOV + timedelta(days=2), instance_type="inf2.xlarge"),
    )
    finalized = await finalize_due(database, now=DEC + timedelta(days=2))
    assert [i.status for i in await invoices(database, good)] == ["finalized"]
    assert [i.status for i in await invoices(database, bad)] == ["draft"]
    assert len(finalized) == 1
    assert "mixes currencies" in caplog.text
    async with database.unit_of_work(bad) as session:
        unbilled = (await session.execute(select(UsageEvent).where(UsageEvent.invoice_line_id.is_(None)))).all()
    assert len(unbilled) == 2  # the failed attempt rolled back: nothing was claimed
