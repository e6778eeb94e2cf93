"""Usage roll-ups: recomputed per bucket from the ledger, equal to what the usage API reads, idempotent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from switchyard.platform.billing.aggregates import recent_hours, refresh_aggregates
from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.billing.tx import own_transaction
from switchyard.platform.billing.usage import read_usage
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import UsageAggregate
from tests.platform.billing.factories import receipt

DAY = datetime(2026, 11, 3, tzinfo=UTC)


async def rows(database: Database, scope: TenantScope, width: str) -> list[tuple[Any, ...]]:
    async with database.unit_of_work(scope) as session:
        found = await session.execute(
            select(UsageAggregate).where(UsageAggregate.bucket_width == width).order_by(UsageAggregate.bucket_start)
        )
        return sorted(
            (r.bucket_start, r.model, r.api_key_id, r.chip_us, r.prompt_tokens, r.event_count) for r in found.scalars()
        )


async def refresh(database: Database, scope: TenantScope, hours: list[datetime]) -> int:
    async with own_transaction(database, UNSCOPED) as session:
        return await refresh_aggregates(session, tenant_id=scope.tenant_id, hours=hours)


async def test_buckets_are_recomputed_from_the_ledger(database: Database, new_tenant: Any) -> None:
    scope, other = await new_tenant(), await new_tenant()
    events = [
        receipt(chip_us=10, occurred_at=DAY + timedelta(hours=1, minutes=1), model="a", api_key_id="key_1"),
        receipt(chip_us=20, occurred_at=DAY + timedelta(hours=1, minutes=59), model="a", api_key_id="key_1"),
        receipt(chip_us=40, occurred_at=DAY + timedelta(hours=5), model="b"),
    ]
    async with database.unit_of_work(scope) as session:
        for event in events:
            await record_usage(session, scope=scope, event=event)
    async with database.unit_of_work(other) as session:
        await record_usage(session, scope=other, event=receipt(chip_us=10**6, occurred_at=DAY))
    hours = [e.occurred_at for e in events]
    assert await refresh(database, scope, hours) == 4  # two hours + two groups in the day
    assert await refresh(database, scope, hours) == 4  # a redelivery writes the same rows
    assert await rows(database, scope, "1h") == [
        (DAY + timedelta(hours=1), "a", "key_1", 30, 20, 2),
        (DAY + timedelta(hours=5), "b", "", 40, 10, 1),
    ]
    assert await rows(database, scope, "1d") == [(DAY, "a", "key_1", 30, 20, 2), (DAY, "b", "", 40, 10, 1)]

    late = receipt(chip_us=5, occurred_at=DAY + timedelta(hours=1, minutes=30), model="a", api_key_id="key_1")
    async with database.unit_of_work(scope) as session:
        await record_usage(session, scope=scope, event=late)
    async with database.unit_of_work(UNSCOPED) as session:
        recent = await recent_hours(session, since=datetime.now(UTC) - timedelta(minutes=5))
    assert sorted(recent[scope.tenant_id]) == [DAY + timedelta(hours=1), DAY + timedelta(hours=5)]
    assert recent[other.tenant_id] == [DAY]
    await refresh(database, scope, recent[scope.tenant_id])
    daily = await rows(database, scope, "1d")
    assert daily == [(DAY, "a", "key_1", 35, 30, 3), (DAY, "b", "", 40, 10, 1)]
    async with database.unit_of_work(scope) as session:
        (bucket,) = await read_usage(
            session, scope=scope, start=DAY, end=DAY + timedelta(days=1), width="1d", group_by=["model"]
        )
    assert sorted((r.group["model"], r.chip_us, r.num_model_requests) for r in bucket.rows) == [
        (model, chip_us, count) for _, model, _, chip_us, _, count in daily
    ]


async def test_roll_ups_sum_cached_tokens_as_the_usage_api_reads_them(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    events = [
        receipt(
            chip_us=10,
            occurred_at=DAY + timedelta(hours=2),
            model="a",
            prompt_tokens=900,
            cached_tokens=800,
            cache_saved_chip_us=7,
        ),
        receipt(chip_us=30, occurred_at=DAY + timedelta(hours=2, minutes=5), model="a", prompt_tokens=50),
        receipt(
            chip_us=20,
            occurred_at=DAY + timedelta(hours=3),
            model="a",
            prompt_tokens=700,
            cached_tokens=640,
            cache_saved_chip_us=5,
        ),
    ]
    async with database.unit_of_work(scope) as session:
        for event in events:
            await record_usage(session, scope=scope, event=event)
    await refresh(database, scope, [e.occurred_at for e in events])
    async with database.unit_of_work(scope) as session:
        found = await session.execute(select(UsageAggregate).where(UsageAggregate.bucket_width == "1h"))
        hourly = sorted((r.bucket_start, r.cached_tokens, r.cache_saved_chip_us) for r in found.scalars())
        (day,) = await read_usage(session, scope=scope, start=DAY, end=DAY + timedelta(days=1), width="1d")
    assert hourly == [(DAY + timedelta(hours=2), 800, 7), (DAY + timedelta(hours=3), 640, 5)]
    assert [(row.input_cached_tokens, row.cache_saved_chip_us) for row in day.rows] == [(1440, 12)]
