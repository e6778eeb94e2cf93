"""Reconciliation (`switchyard billing reconcile`) and the Celery jobs, run in-process on a real database."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing.fleet import record_fleet_busy, record_fleet_receipts
from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.cli import main
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import InvoiceLine, UsageEvent
from switchyard.platform.settings import Settings
from switchyard.platform.tenants.service import create_tenant
from switchyard.platform.worker import create_celery
from tests.platform.billing.factories import receipt, record_fleet_side

T = TypeVar("T")
NOV = datetime(2026, 11, 1, tzinfo=UTC)


def run(url: str, job: Callable[[Database], Awaitable[T]]) -> T:
    async def go() -> T:
        database = Database(url)
        try:
            return await job(database)
        finally:
            await database.dispose()

    return asyncio.run(go())


async def _month_of_usage(database: Database) -> TenantScope:
    async with database.unit_of_work(UNSCOPED) as session:
        scope = TenantScope((await create_tenant(session, actor=Actor("t", None), name="r", owner_email=None)).id)
    events = [receipt(chip_us=1_000_000 * (i + 1), occurred_at=NOV + timedelta(days=i, minutes=i)) for i in range(3)]
    async with database.unit_of_work(scope) as session:
        for event in events:
            await record_usage(session, scope=scope, event=event)
    async with database.unit_of_work(UNSCOPED) as session:
        await record_fleet_side(session, scope, events, replicas=2)
        # two flushes of one replica in one minute add up in the minute's row
        await record_fleet_busy(session, replica="r9", instance_type="trn2.48xlarge", chip_us=1, period_start=NOV)
        await record_fleet_busy(session, replica="r9", instance_type="trn2.48xlarge", chip_us=2, period_start=NOV)
        await record_fleet_receipts(session, [(scope.tenant_id, "tiny", "r9", "trn2.48xlarge", 3, NOV)])
    async with database.unit_of_work(scope) as session:
        tiny = receipt(chip_us=3, occurred_at=NOV, event_id="tiny")
        await record_usage(session, scope=scope, event=tiny)
    return scope


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> CliRunner:
    return CliRunner(env={"SWITCHYARD_DATABASE_URL": database_url, "SWITCHYARD_DATA_DIR": str(tmp_path / "data")})


def test_jobs_then_reconcile_clean_then_tampering_is_caught(database_url: str, cli: CliRunner, tmp_path: Path) -> None:
    run(database_url, _month_of_usage)
    unrated = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert unrated.exit_code == 1
    assert "4 usage events are pending, not rated" in unrated.output
    assert "usage events: 4 (0 rated, 4 pending); 0 on finalized invoices, 4 not invoiced yet" in unrated.output

    tasks = create_celery(Settings(data_dir=tmp_path / "data", database_url=database_url)).tasks
    assert tasks["billing.rate_events"].apply().get() == {"rated": 4, "unpriced": 0}
    assert tasks["billing.rate_events"].apply().get() == {"rated": 0, "unpriced": 0}  # a redelivery: no change
    assert tasks["billing.sweep"].apply().get()["events"] == 0
    run(database_url, lambda db: finalize_due(db, now=datetime(2026, 12, 3, tzinfo=UTC)))

    clean = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert clean.exit_code == 0, clean.output
    assert "attributed 6,000,003 chip-us, fleet busy 6,000,003" in clean.output
    assert "usage events: 4 (4 rated); 4 on finalized invoices, 0 not invoiced yet" in clean.output
    assert "OK: no discrepancies" in clean.output

    async def tamper(database: Database) -> None:
        async with database.unit_of_work(UNSCOPED) as session:
            line = (await session.execute(select(InvoiceLine))).scalar_one()
            await session.execute(update(InvoiceLine).values(amount_minor=line.amount_minor + 1))
            first = (await session.execute(select(UsageEvent).order_by(UsageEvent.id))).scalars().first()
            assert first is not None
            await session.execute(update(UsageEvent).where(UsageEvent.id == first.id).values(chip_us=first.chip_us + 7))

    run(database_url, tamper)
    broken = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert broken.exit_code == 1
    assert "attributed 6,000,010 chip-us" in broken.output
    over = re.search(r"bills (\d+) chip-us but its receipts add up to (\d+)", broken.output)
    assert over
    assert int(over.group(1)) - int(over.group(2)) == 7
    assert "sum of lines" in broken.output
    assert "its events sum to 6000010" in broken.output
    assert cli.invoke(main, ["billing", "reconcile", "--period", "2026-13"]).exit_code == 2


def test_rated_events_of_a_month_not_invoiced_yet_are_counted_as_rated(
    database_url: str, cli: CliRunner, tmp_path: Path
) -> None:
    """Issue 17: a month rated but not finalized yet printed "0 billed, 4 unbilled", as if nothing were rated."""
    run(database_url, _month_of_usage)
    tasks = create_celery(Settings(data_dir=tmp_path / "data", database_url=database_url)).tasks
    assert tasks["billing.rate_events"].apply().get() == {"rated": 4, "unpriced": 0}

    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert report.exit_code == 0, report.output
    assert "usage events: 4 (4 rated); 0 on finalized invoices, 4 not invoiced yet" in report.output
    assert "unbilled" not in report.output


def test_usage_without_fleet_busy_time_is_a_discrepancy_not_a_skipped_check(database_url: str, cli: CliRunner) -> None:
    async def usage_only(database: Database) -> None:
        async with database.unit_of_work(UNSCOPED) as session:
            scope = TenantScope((await create_tenant(session, actor=Actor("t", None), name="u", owner_email=None)).id)
        async with database.unit_of_work(scope) as session:
            await record_usage(session, scope=scope, event=receipt(chip_us=5_000, occurred_at=NOV + timedelta(hours=1)))

    run(database_url, usage_only)
    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert report.exit_code == 1
    assert "bills 5000 chip-us but its receipts add up to 0" in report.output
    assert "fleet busy not recorded" in report.output


def test_compute_no_usage_event_accounts_for_is_named_and_not_billed(database_url: str, cli: CliRunner) -> None:
    lost_at = NOV + timedelta(days=2, hours=3, minutes=4)

    async def lost_one(database: Database) -> None:
        scope = await _month_of_usage(database)
        async with database.unit_of_work(UNSCOPED) as session:  # a gateway died before it committed this one
            await record_fleet_side(session, scope, [receipt(chip_us=1_234, occurred_at=lost_at, event_id="gone")])

    run(database_url, lost_one)
    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert "fleet busy 6,001,237, of which 1,234 never reached the books" in report.output
    assert "not billed: 1,234 chip-us of gone" in report.output
    assert "at 2026-11-03 03:04:00 UTC" in report.output
    assert "receipts add up" not in report.output  # only the pending events are discrepancies


def test_busy_time_no_receipt_accounts_for_is_a_discrepancy(database_url: str, cli: CliRunner) -> None:
    async def in_flight_lost(database: Database) -> None:
        await _month_of_usage(database)
        async with database.unit_of_work(UNSCOPED) as session:  # a fleet process killed mid-request
            await record_fleet_busy(session, replica="r0", instance_type="trn2.48xlarge", chip_us=77, period_start=NOV)

    run(database_url, in_flight_lost)
    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert report.exit_code == 1
    assert "recorded 6000080 busy chip-us but issued receipts for 6000003 (-77)" in report.output
