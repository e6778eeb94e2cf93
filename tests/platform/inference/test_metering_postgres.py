"""Metering on PostgreSQL: receipts with no budget to settle are one INSERT on a kept connection (``db.direct``),
stored as a session stores them, and a dropped connection loses none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select, text

from switchyard.platform.billing.ledger import UsageEventCreate, record_usage_bulk
from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.db.direct import APPLICATION_NAME
from switchyard.platform.inference.metering import MeterBatcher, Metering
from switchyard.platform.models import Tenant, UsageEvent, utc_now

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


async def _tenant(database: Database) -> TenantScope:
    async with database.unit_of_work(UNSCOPED) as session:
        tenant = Tenant(id=new_id("ten"), name="metered")
        session.add(tenant)
    return TenantScope(tenant.id)


def _metering(scope: TenantScope, event_id: str) -> Metering:
    event = UsageEventCreate(
        event_id=event_id,
        model="m",
        api_key_id="key_1",
        instance_type="trn2.48xlarge",
        chip_us=1234,
        prompt_tokens=3,
        completion_tokens=4,
        cached_tokens=1,
        occurred_at=utc_now(),
    )
    return Metering(scope, event, reservation_id=None)


async def _events(database: Database) -> dict[str, UsageEvent]:
    async with database.unit_of_work(UNSCOPED) as session:
        return {e.event_id: e for e in (await session.execute(select(UsageEvent))).scalars()}


async def _kept_connections(database: Database) -> int:
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name AND datname = current_database()"
    )
    async with database.engine.connect() as connection:
        return int((await connection.execute(query, {"name": APPLICATION_NAME})).scalar_one())


async def test_receipts_go_on_the_kept_connection_once_each_and_read_as_a_session_writes_them(
    database: Database,
) -> None:
    scope = await _tenant(database)
    batcher = MeterBatcher(database)
    await asyncio.gather(*(batcher.write(_metering(scope, f"req-{n}")) for n in range(20)))
    await batcher.write(_metering(scope, "req-3"))  # a redelivered receipt is stored once
    assert await _kept_connections(database) == 1

    direct = _metering(scope, "req-direct")
    await batcher.write(direct)
    async with database.unit_of_work(scope) as session:
        ordinary = direct.event.model_copy(update={"event_id": "req-ordinary"})
        assert await record_usage_bulk(session, scope=scope, events=[ordinary]) == (1, 0)

    events = await _events(database)
    assert sorted(events) == sorted([f"req-{n}" for n in range(20)] + ["req-direct", "req-ordinary"])
    differ = {"id", "event_id", "recorded_at"}
    by_path = [events[name].model_dump(exclude=differ) for name in ("req-direct", "req-ordinary")]
    assert by_path[0] == by_path[1]
    assert by_path[0]["tenant_id"] == scope.tenant_id
    assert by_path[0]["occurred_at"] == direct.event.occurred_at


async def test_a_dropped_kept_connection_loses_no_receipt_and_is_opened_again(database: Database) -> None:
    scope = await _tenant(database)
    batcher = MeterBatcher(database)
    await batcher.write(_metering(scope, "before"))
    async with database.engine.connect() as connection:  # the server ends it (a restart, an administrator)
        await connection.execute(
            text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"),
            {"name": APPLICATION_NAME},
        )
        await connection.commit()
    for _ in range(50):
        if await _kept_connections(database) == 0:
            break
        await asyncio.sleep(0.05)

    await batcher.write(_metering(scope, "while-dropped"))  # fails there, goes through a session
    await batcher.write(_metering(scope, "after"))  # on a new kept connection
    assert sorted(await _events(database)) == ["after", "before", "while-dropped"]
    assert await _kept_connections(database) == 1
