"""Reconciliation (`switchyard billing reconcile`) and the Celery jobs, run in-process on a real database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from switchyard.platform.auth.principal import Actor
from switchyard.platform.billing.fleet import record_fleet_busy
from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.cli import main
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import InvoiceLine, UsageEvent
from switchyard.platform.settings import Settings
from switchyard.platform.tenants.service import create_tenant
from switchyard.platform.worker import create_celery
from tests.platform.billing.factories import receipt

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
    async with database.unit_of_work(scope) as session:
        for i in range(3):
            event = receipt(chip_us=1_000_000 * (i + 1), occurred_at=NOV + timedelta(days=i, minutes=i))
            await record_usage(session, scope=scope, event=event)
    async with database.unit_of_work(UNSCOPED) as session:
        await record_fleet_busy(
            session, replica="r0", instance_type="trn2.48xlarge", chip_us=4_000_000, period_start=NOV
        )
        await record_fleet_busy(  # two flushes of one replica in one minute add up in the minute's row
            session, replica="r1", instance_type="trn2.48xlarge", chip_us=1_500_000, period_start=NOV
        )
        await record_fleet_busy(session, replica="r1", instance_type="trn2.48xlarge", chip_us=500_000, period_start=NOV)
    return scope


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> CliRunner:
    return CliRunner(env={"SWITCHYARD_DATABASE_URL": database_url, "SWITCHYARD_DATA_DIR": str(tmp_path / "data")})


def test_jobs_then_reconcile_clean_then_tampering_is_caught(database_url: str, cli: CliRunner, tmp_path: Path) -> None:
    run(database_url, _month_of_usage)
    unrated = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert unrated.exit_code == 1
    assert "3 usage events are pending, not rated" in unrated.output

    tasks = create_celery(Settings(data_dir=tmp_path / "data", database_url=database_url)).tasks
    assert tasks["billing.rate_events"].apply().get() == {"rated": 3, "unpriced": 0}
    assert tasks["billing.rate_events"].apply().get() == {"rated": 0, "unpriced": 0}  # a redelivery: no change
    assert tasks["billing.sweep"].apply().get()["events"] == 0
    run(database_url, lambda db: finalize_due(db, now=datetime(2026, 12, 3, tzinfo=UTC)))

    clean = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert clean.exit_code == 0, clean.output
    assert "attributed 6,000,000 chip-us, fleet busy 6,000,000" in clean.output
    assert "3 billed, 0 unbilled" in clean.output
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
    assert "attributed 6000007 chip-us but the fleet recorded 6000000" in broken.output
    assert "sum of lines" in broken.output
    assert "its events sum to 6000007" in broken.output
    assert cli.invoke(main, ["billing", "reconcile", "--period", "2026-13"]).exit_code == 2


def test_usage_without_fleet_busy_time_is_a_discrepancy_not_a_skipped_check(database_url: str, cli: CliRunner) -> None:
    async def usage_only(database: Database) -> None:
        async with database.unit_of_work(UNSCOPED) as session:
            scope = TenantScope((await create_tenant(session, actor=Actor("t", None), name="u", owner_email=None)).id)
        async with database.unit_of_work(scope) as session:
            await record_usage(session, scope=scope, event=receipt(chip_us=5_000, occurred_at=NOV + timedelta(hours=1)))

    run(database_url, usage_only)
    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert report.exit_code == 1
    assert "trn2.48xlarge: 5000 chip-us attributed but no fleet busy time recorded" in report.output
    assert "fleet busy not recorded" in report.output


def test_compute_no_gateway_received_is_named_with_its_minute(database_url: str, cli: CliRunner) -> None:
    async def lost_one(database: Database) -> None:
        scope = await _month_of_usage(database)
        async with database.unit_of_work(UNSCOPED) as session:
            await record_fleet_busy(
                session,
                replica="llama/0",
                instance_type="trn2.48xlarge",
                chip_us=1_234,
                undelivered_chip_us=1_234,
                period_start=NOV + timedelta(days=2, hours=3, minutes=4),
            )
        assert scope

    run(database_url, lost_one)
    report = cli.invoke(main, ["billing", "reconcile", "--period", "2026-11"])
    assert "fleet busy 6,001,234, of which 1,234 never delivered to a gateway" in report.output
    assert "not billed: 1,234 chip-us on llama/0 in the minute from 2026-11-03 03:04 UTC" in report.output
    assert "chip-us but the fleet recorded" not in report.output  # only the pending events are discrepancies


def test_rate_card_command_seeds_the_catalog(cli: CliRunner) -> None:
    result = cli.invoke(main, ["billing", "rate-cards", "--seed"])
    assert result.exit_code == 0, result.output
    assert "trn2.48xlarge" in result.output
    assert "2.936250000000000 USD/chip-hour" in result.output
