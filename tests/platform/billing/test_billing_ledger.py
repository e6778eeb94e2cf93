"""The usage ledger: idempotent outbox inserts and rating with the effective rate card."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from switchyard.platform.billing.errors import NoApplicablePrice
from switchyard.platform.billing.ledger import rate_events, record_usage, record_usage_bulk
from switchyard.platform.billing.rates import create_rate_card, price_chip_us
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.models import RateCard, UsageEvent
from tests.platform.billing.factories import receipt


async def test_record_usage_is_idempotent_per_tenant(database: Database, new_tenant: Any) -> None:
    a, b = await new_tenant(), await new_tenant()
    event = receipt(event_id="req_same")
    async with database.unit_of_work(a) as session:
        assert await record_usage(session, scope=a, event=event) is True
        assert await record_usage(session, scope=a, event=event) is False
    async with database.unit_of_work(b) as session:
        assert await record_usage(session, scope=b, event=event) is True  # another tenant's key space
    async with database.unit_of_work(a) as session:
        inserted, duplicates = await record_usage_bulk(
            session, scope=a, events=[event, receipt(event_id="req_new"), receipt(event_id="req_new2")]
        )
        assert (inserted, duplicates) == (2, 1)
    async with database.unit_of_work(UNSCOPED) as session:
        rows = (await session.execute(select(UsageEvent))).scalars().all()
    assert sorted((r.tenant_id == a.tenant_id, r.event_id) for r in rows) == [
        (False, "req_same"),
        (True, "req_new"),
        (True, "req_new2"),
        (True, "req_same"),
    ]
    assert all(r.occurred_at.microsecond == 0 and r.status == "pending" for r in rows)


async def test_usage_rolls_back_with_the_request(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    try:
        async with database.unit_of_work(scope) as session:
            await record_usage(session, scope=scope, event=receipt())
            raise RuntimeError("request failed")
    except RuntimeError:
        pass
    async with database.unit_of_work(scope) as session:
        assert (await session.execute(select(UsageEvent))).scalars().all() == []


async def test_rating_uses_the_card_effective_at_the_event(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    change = datetime(2026, 11, 20, tzinfo=UTC)
    before = receipt(occurred_at=datetime(2026, 11, 19, 23, 59, 59, 999_999, tzinfo=UTC))
    after = receipt(occurred_at=change)
    async with database.unit_of_work(scope) as session:
        await record_usage_bulk(session, scope=scope, events=[before, after])
    async with database.unit_of_work(UNSCOPED) as session:
        await create_rate_card(
            session,
            instance_type="trn2.48xlarge",
            price_per_chip_hour=Decimal("3.000000000000001"),
            effective_from=change,
        )
        result = await rate_events(session)
        assert (result.rated, result.unpriced) == (2, 0)
        assert (await rate_events(session)).rated == 0  # redelivery: nothing left to rate
        rows = {r.event_id: r for r in (await session.execute(select(UsageEvent))).scalars()}
    assert rows[before.event_id].price_per_chip_hour == Decimal("2.936250000000000")  # catalog: 46.98 / 16
    assert rows[after.event_id].price_per_chip_hour == Decimal("3.000000000000001")  # 15 places kept exactly
    assert rows[after.event_id].occurred_at == change
    assert {r.status for r in rows.values()} == {"rated"}


async def test_unknown_instance_is_unpriced_never_zero(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    async with database.unit_of_work(scope) as session:
        await record_usage(session, scope=scope, event=receipt(instance_type="trn3-gen2-ultraserver"))
    async with database.unit_of_work(UNSCOPED) as session:
        result = await rate_events(session)
        assert (result.rated, result.unpriced) == (0, 1)
        row = (await session.execute(select(UsageEvent))).scalar_one()
        assert row.status == "unpriced"
        assert row.price_per_chip_hour is None
        assert "trn3-gen2-ultraserver" in (row.rating_error or "")
        try:
            await price_chip_us(
                session, instance_type="trn3-gen2-ultraserver", model="m", tenant_tier="standard", at=row.occurred_at
            )
        except NoApplicablePrice:
            pass
        else:
            raise AssertionError("an unpriced instance type must raise NoApplicablePrice")
        await create_rate_card(
            session,
            instance_type="trn3-gen2-ultraserver",
            price_per_chip_hour=Decimal("4.5"),
            effective_from=datetime(2026, 1, 1, tzinfo=UTC),
        )
        assert (await rate_events(session)).rated == 1  # the sweeper's retry prices it once a card exists
        assert (await session.execute(select(RateCard.id))).scalars().all()


async def test_most_specific_card_wins(database: Database) -> None:
    at = datetime(2026, 6, 1, tzinfo=UTC)
    async with database.unit_of_work(UNSCOPED) as session:
        for model, tier, price in [("*", "*", "1"), ("m", "*", "2"), ("m", "standard", "3"), ("*", "gold", "4")]:
            await create_rate_card(
                session,
                instance_type="inf2.xlarge",
                model=model,
                tenant_tier=tier,
                price_per_chip_hour=Decimal(price),
                effective_from=datetime(2026, 1, 1, tzinfo=UTC),
            )
        price = await price_chip_us(session, instance_type="inf2.xlarge", model="m", tenant_tier="standard", at=at)
        assert price == Decimal(3)
        price = await price_chip_us(session, instance_type="inf2.xlarge", model="x", tenant_tier="gold", at=at)
        assert price == Decimal(4)
        price = await price_chip_us(session, instance_type="inf2.xlarge", model="x", tenant_tier="standard", at=at)
        assert price == Decimal(1)


async def test_bulk_insert_of_thousands_in_one_transaction(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    events = [receipt(event_id=f"bulk_{i}", chip_us=i) for i in range(2_500)]
    async with database.unit_of_work(scope) as session:
        assert await record_usage_bulk(session, scope=scope, events=events) == (2_500, 0)
        assert await record_usage_bulk(session, scope=scope, events=events[:700]) == (0, 700)
