"""Metering writes: on SQLite receipts commit inline on the loop's thread, and fall back when the lock is taken;
the fleet's busy time and receipts are written the same way. On PostgreSQL receipts with no budget to settle are one
INSERT on a kept connection (``db.direct``), stored as a session stores them, and a dropped connection loses none."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from switchyard.platform.billing.fleet import minute_of, record_fleet_sync
from switchyard.platform.billing.ledger import UsageEventCreate, record_usage_bulk
from switchyard.platform.billing.periods import hour_start
from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.db.direct import APPLICATION_NAME
from switchyard.platform.inference.metering import MeterBatcher, Metering
from switchyard.platform.models import FleetBusy, FleetReceipt, Tenant, UsageEvent, utc_now


@pytest.fixture
def path(sqlite_template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "switchyard.db"
    copy.write_bytes(sqlite_template.read_bytes())
    return copy


@pytest.fixture
async def database(path: Path) -> Any:
    database = Database(f"sqlite:///{path}")
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


async def _events(database: Database) -> list[UsageEvent]:
    async with database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_receipts_of_one_loop_turn_commit_together_and_each_once(database: Database) -> None:
    scope = await _tenant(database)
    batcher = MeterBatcher(database)
    await asyncio.gather(*(batcher.write(_metering(scope, f"req-{n}")) for n in range(20)))
    await batcher.write(_metering(scope, "req-3"))  # a redelivered receipt is stored once
    events = await _events(database)
    assert sorted(e.event_id for e in events) == sorted(f"req-{n}" for n in range(20))
    assert all(e.tenant_id == scope.tenant_id and e.chip_us == 1234 for e in events)


async def test_a_write_lock_held_elsewhere_delays_the_receipt_but_loses_nothing(database: Database, path: Path) -> None:
    scope = await _tenant(database)
    batcher = MeterBatcher(database)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process (a worker) is writing
    try:
        write = asyncio.create_task(batcher.write(_metering(scope, "req-locked")))
        await asyncio.sleep(0.3)
        assert not write.done()  # not committed, so the client has no answer yet
    finally:
        other.execute("ROLLBACK")
        other.close()
    await asyncio.wait_for(write, timeout=30)
    assert [e.event_id for e in await _events(database)] == ["req-locked"]


async def test_an_inline_receipt_is_stored_as_the_ordinary_path_stores_one(database: Database, path: Path) -> None:
    """The inline write hands SQLite its values itself: the row must read (and compare, in SQL) as the ORM's does."""
    scope = await _tenant(database)
    inline = _metering(scope, "req-inline")
    ordinary = Metering(scope, inline.event.model_copy(update={"event_id": "req-ordinary"}), reservation_id=None)
    await MeterBatcher(database).write(inline)
    async with database.unit_of_work(scope) as session:
        assert await record_usage_bulk(session, scope=scope, events=[ordinary.event]) == (1, 0)
    stored = sqlite3.connect(path)
    stored.row_factory = sqlite3.Row
    rows = {row["event_id"]: dict(row) for row in stored.execute("SELECT * FROM usage_events")}
    stored.close()
    assert set(rows) == {"req-inline", "req-ordinary"}
    for column in ("occurred_at", "hour_start", "period_start", "recorded_at"):  # text of one format, both ways
        assert len(rows["req-inline"][column]) == len(rows["req-ordinary"][column]) == 26
    differ = {"id", "event_id", "recorded_at"}
    assert {k: v for k, v in rows["req-inline"].items() if k not in differ} == {
        k: v for k, v in rows["req-ordinary"].items() if k not in differ
    }
    read_back = {e.event_id: e for e in await _events(database)}
    assert read_back["req-inline"].occurred_at == inline.event.occurred_at  # to the microsecond, aware
    assert read_back["req-inline"].hour_start == hour_start(inline.event.occurred_at)


async def test_busy_time_recorded_inline_adds_up_in_its_minute_and_receipts_read_back(database: Database) -> None:
    minute = minute_of(utc_now())
    finished = utc_now()
    assert database.inline is not None
    for n in range(2):
        receipt = ("ten_x", f"req-{n}", "r1", "trn2.48xlarge", 5, finished)
        database.inline.write(lambda c, r=receipt: record_fleet_sync(c, [("r1", "trn2.48xlarge", 5)], [r], minute))
    async with database.unit_of_work(UNSCOPED) as session:
        slices = list((await session.execute(select(FleetBusy))).scalars())
        receipts = list((await session.execute(select(FleetReceipt))).scalars())
    assert [(s.replica, s.chip_us, s.period_start) for s in slices] == [("r1", 10, minute)]
    assert sorted((r.request_id, r.chip_us, r.finished_at) for r in receipts) == [
        ("req-0", 5, finished),
        ("req-1", 5, finished),
    ]


def test_a_naive_timestamp_is_refused_and_nothing_is_written(database: Database) -> None:
    """The ORM refuses a datetime without a zone; the inline statement must too, not take it as local time."""
    minute = minute_of(utc_now())
    naive = ("ten_x", "req-naive", "r1", "trn2.48xlarge", 5, utc_now().replace(tzinfo=None))
    assert database.inline is not None
    with pytest.raises(ValueError, match="naive datetime"):
        database.inline.write(lambda c: record_fleet_sync(c, [("r1", "trn2.48xlarge", 5)], [naive], minute))
    with sqlite3.connect(database.url.removeprefix("sqlite:///")) as stored:
        assert stored.execute("SELECT count(*) FROM fleet_receipts").fetchone() == (0,)
        assert stored.execute("SELECT count(*) FROM fleet_busy").fetchone() == (0,)


ON_POSTGRES = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
async def postgres(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


async def _kept_connections(database: Database) -> list[int]:
    """The backends of the kept connection to this test's database."""
    query = text("SELECT pid FROM pg_stat_activity WHERE application_name = :name AND datname = current_database()")
    async with database.engine.connect() as connection:
        return list((await connection.execute(query, {"name": APPLICATION_NAME})).scalars())


@ON_POSTGRES
async def test_receipts_go_on_the_kept_connection_once_each_and_read_as_a_session_writes_them(
    postgres: Database,
) -> None:
    scope = await _tenant(postgres)
    batcher = MeterBatcher(postgres)
    await asyncio.gather(*(batcher.write(_metering(scope, f"req-{n}")) for n in range(20)))
    await batcher.write(_metering(scope, "req-3"))  # a redelivered receipt is stored once
    assert len(await _kept_connections(postgres)) == 1

    direct = _metering(scope, "req-direct")
    await batcher.write(direct)
    async with postgres.unit_of_work(scope) as session:
        ordinary = direct.event.model_copy(update={"event_id": "req-ordinary"})
        assert await record_usage_bulk(session, scope=scope, events=[ordinary]) == (1, 0)

    events = {e.event_id: e for e in await _events(postgres)}
    assert sorted(events) == sorted([f"req-{n}" for n in range(20)] + ["req-direct", "req-ordinary"])
    differ = {"id", "event_id", "recorded_at"}
    by_path = [events[name].model_dump(exclude=differ) for name in ("req-direct", "req-ordinary")]
    assert by_path[0] == by_path[1]
    assert by_path[0]["tenant_id"] == scope.tenant_id
    assert by_path[0]["occurred_at"] == direct.event.occurred_at


@ON_POSTGRES
async def test_a_dropped_kept_connection_loses_no_receipt_and_is_opened_again(
    postgres: Database, caplog: pytest.LogCaptureFixture
) -> None:
    scope = await _tenant(postgres)
    batcher = MeterBatcher(postgres)
    await batcher.write(_metering(scope, "before"))
    (kept,) = await _kept_connections(postgres)
    async with postgres.engine.connect() as connection:  # the server ends it (a restart, an administrator)
        await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": kept})
    for _ in range(100):
        if not await _kept_connections(postgres):
            break
        await asyncio.sleep(0.05)

    await batcher.write(_metering(scope, "while-dropped"))  # fails there, goes through a session
    assert "on the kept connection failed; writing through a session" in caplog.text
    await batcher.write(_metering(scope, "after"))  # on a new kept connection
    assert sorted(e.event_id for e in await _events(postgres)) == ["after", "before", "while-dropped"]
    assert len(await _kept_connections(postgres)) == 1
