"""Crash test: a real Celery worker is killed with SIGKILL again and again while 2,000 requests are metered.

Receipts are recorded in batches (the outbox) and a ``billing.rate_events`` task is sent after each commit;
every few batches the worker is ``kill -9``-ed mid-work and a new one started. Whatever the kills lose (an
open transaction, a message taken off the broker), the sweeper's job — re-sending ``billing.rate_events``
for what is still pending — recovers. Afterwards there is exactly one rated event per request, the rated
chip-µs equal the receipts exactly, and reconciliation of the month is clean.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import func, select

from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.billing.ledger import UsageEventCreate, record_usage_bulk
from switchyard.platform.billing.periods import month_start, next_month
from switchyard.platform.billing.reconcile import reconcile
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import UsageAggregate, UsageEvent
from switchyard.platform.settings import Settings
from switchyard.platform.tenants.service import create_tenant
from switchyard.platform.worker import create_celery
from tests.platform.billing.factories import record_fleet_side

pytestmark = pytest.mark.slow
T = TypeVar("T")
REQUESTS = 2_000
BATCH = 100


def run(url: str, job: Callable[[Database], Awaitable[T]]) -> T:
    async def go() -> T:
        database = Database(url)
        try:
            return await job(database)
        finally:
            await database.dispose()

    return asyncio.run(go())


@pytest.fixture(params=["sqlite-broker", pytest.param("redis-broker", marks=pytest.mark.redis)])
def worker_env(request: pytest.FixtureRequest, database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_DATABASE_URL": database_url}
    env["SWITCHYARD_SIMULATE_IN_PROCESS"] = "1"  # the worker rates and finalizes; it serves no model
    if request.param == "redis-broker":
        env["SWITCHYARD_BROKER_URL"] = request.getfixturevalue("redis_database")
    return env


@pytest.fixture
def workers(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        with open(tmp_path / f"worker-{len(started)}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "switchyard.platform.cli", "worker", "--pool", "solo"],
                env={**os.environ, **worker_env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _pending_ids(url: str) -> list[str]:
    async def job(database: Database) -> list[str]:
        async with database.unit_of_work(UNSCOPED) as session:
            statement = select(UsageEvent.id).where(UsageEvent.status != "rated").order_by(UsageEvent.id)
            return list((await session.execute(statement)).scalars())

    return run(url, job)


def test_kill_9_while_metering_loses_and_duplicates_nothing(
    worker_env: dict[str, str], workers: Callable[[], subprocess.Popen[bytes]]
) -> None:
    url = worker_env["SWITCHYARD_DATABASE_URL"]
    settings = Settings(
        data_dir=Path(worker_env["SWITCHYARD_DATA_DIR"]),
        database_url=url,
        broker_url=worker_env.get("SWITCHYARD_BROKER_URL", ""),
    )
    settings.ensure_data_dir()
    celery = create_celery(settings)

    async def make_tenant(database: Database) -> TenantScope:
        async with database.unit_of_work(UNSCOPED) as session:
            created = await create_tenant(session, actor=Actor("t", None), name="crash", owner_email=None)
        return TenantScope(created.id)

    scope = run(url, make_tenant)
    rng = random.Random(7)
    now = datetime.now(UTC)
    receipts = [
        UsageEventCreate(
            event_id=f"req_{i}",
            model=rng.choice(["llama-3.1-8b", "llama-3.1-70b"]),
            instance_type=rng.choice(["trn2.48xlarge", "inf2.48xlarge"]),
            chip_us=rng.randrange(1, 50_000_000),
            occurred_at=max(month_start(now), now - timedelta(seconds=REQUESTS - i)),
        )
        for i in range(REQUESTS)
    ]

    worker = workers()
    kills = 0
    for start in range(0, REQUESTS, BATCH):
        batch = receipts[start : start + BATCH]

        async def record(database: Database, batch: list[UsageEventCreate] = batch) -> list[str]:
            async with database.unit_of_work(scope) as session:
                await record_usage_bulk(session, scope=scope, events=batch)
                ids = select(UsageEvent.id).where(UsageEvent.event_id.in_([e.event_id for e in batch]))
                return list((await session.execute(ids)).scalars())

        ids = run(url, record)
        celery.send_task("billing.rate_events", args=[ids])  # sent after the commit
        if (start // BATCH) % 4 == 3:
            time.sleep(rng.uniform(0.5, 2.5))  # let it get into the middle of some work
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            kills += 1
            worker = workers()
    assert kills >= 4

    deadline = time.monotonic() + 240
    while pending := _pending_ids(url):  # the sweeper's job: re-send what is still pending
        assert time.monotonic() < deadline, f"{len(pending)} events still pending"
        for i in range(0, len(pending), 500):
            celery.send_task("billing.rate_events", args=[pending[i : i + 500]])
        time.sleep(3)

    async def check(database: Database) -> Any:
        async with database.unit_of_work(UNSCOPED) as session:
            counts = (
                await session.execute(
                    select(UsageEvent.status, func.count(), func.sum(UsageEvent.chip_us)).group_by(UsageEvent.status)
                )
            ).all()
            await record_fleet_side(session, scope, receipts)
        await finalize_due(database, now=next_month(now) + timedelta(days=2))
        async with database.unit_of_work(UNSCOPED) as session:
            report = await reconcile(session, period_start=month_start(now))
            daily = await session.execute(
                select(func.sum(UsageAggregate.chip_us)).where(UsageAggregate.bucket_width == "1d")
            )
        return counts, report, daily.scalar_one()

    # The periodic roll-up catches aggregate jobs the kills lost: daily buckets then equal the receipts.
    refreshed = celery.send_task("billing.aggregate").get(timeout=120)
    assert refreshed["tenants"] == 1
    celery.control.purge()  # leave no messages for workers of later tests on a shared broker
    counts, report, daily_chip_us = run(url, check)
    assert daily_chip_us == sum(r.chip_us for r in receipts)
    assert [(status, count, int(total)) for status, count, total in counts] == [
        ("rated", REQUESTS, sum(r.chip_us for r in receipts))
    ]
    assert report.ok, report.render()
    assert (report.events, report.billed_events) == (REQUESTS, REQUESTS)
