"""Fleet busy time and receipts: what the replicas computed, for reconciliation against the books.

``record_fleet_busy`` adds an increment to the row of ``(replica, minute)``; ``record_fleet_receipts`` stores the
receipts a process running replicas issued. The processes that run replicas call both through
``inference.busy.FleetBusyRecorder``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.billing.sql import dialect_name
from switchyard.platform.db import new_id
from switchyard.platform.db.inline import insert_rows
from switchyard.platform.models import FleetBusy, FleetReceipt, utc_now

__all__ = [
    "BusyIncrement",
    "ReceiptRow",
    "minute_of",
    "record_fleet_busy",
    "record_fleet_receipts",
    "record_fleet_sync",
]

ReceiptRow = tuple[str, str, str, str, int, datetime]
"""``(tenant_id, request_id, replica, instance_type, chip_us, finished_at)``: one issued compute receipt."""

BusyIncrement = tuple[str, str, int]
"""``(replica, instance_type, chip_us)``: busy chip-µs of a replica to add to the current minute's slice."""


def minute_of(moment: datetime) -> datetime:
    """The UTC minute ``moment`` falls in: the slice its busy time is recorded under."""
    return moment.replace(second=0, microsecond=0)


async def record_fleet_busy(
    session: AsyncSession, *, replica: str, instance_type: str, chip_us: int, period_start: datetime
) -> None:
    """Add ``chip_us`` busy chip-µs of ``replica`` to its slice starting ``period_start``. Reconciliation sums
    slices by ``period_start`` month."""
    await session.execute(_busy_upsert(dialect_name(session), replica, instance_type, chip_us, period_start))


async def record_fleet_receipts(session: AsyncSession, receipts: Sequence[ReceiptRow]) -> None:
    """Store issued receipts (each once: the caller records a batch in one transaction, or retries it whole)."""
    if receipts:
        await session.execute(insert(FleetReceipt), _receipt_rows(receipts))


def record_fleet_sync(
    connection: Connection, busy: Sequence[BusyIncrement], receipts: Sequence[ReceiptRow], period_start: datetime
) -> None:
    """``record_fleet_busy`` for each increment and ``record_fleet_receipts``, on a synchronous connection (the
    inline SQLite writes of ``db.inline``, in one short transaction on the event loop's thread)."""
    now = utc_now()
    rows = [_busy_row(replica, instance_type, chip_us, period_start, now) for replica, instance_type, chip_us in busy]
    insert_rows(connection, "fleet_busy", rows, on_conflict=_ADD_TO_SLICE)
    insert_rows(connection, "fleet_receipts", _receipt_rows(receipts))


_ADD_TO_SLICE = (
    "(replica, period_start) DO UPDATE SET chip_us = fleet_busy.chip_us + excluded.chip_us, "
    "recorded_at = excluded.recorded_at"
)


def _busy_row(
    replica: str, instance_type: str, chip_us: int, period_start: datetime, now: datetime
) -> dict[str, object]:
    if chip_us < 0:
        raise ValueError("chip_us must be >= 0")
    return {
        "id": new_id("fb"),
        "replica": replica,
        "instance_type": instance_type,
        "chip_us": chip_us,
        "period_start": period_start,
        "recorded_at": now,
    }


def _busy_upsert(dialect: str, replica: str, instance_type: str, chip_us: int, period_start: datetime) -> Any:
    module = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(FleetBusy).values(_busy_row(replica, instance_type, chip_us, period_start, utc_now()))
    table = FleetBusy.__table__.c  # type: ignore[attr-defined]
    return statement.on_conflict_do_update(
        index_elements=["replica", "period_start"],
        set_={"chip_us": table.chip_us + statement.excluded.chip_us, "recorded_at": statement.excluded.recorded_at},
    )


def _receipt_rows(receipts: Sequence[ReceiptRow]) -> list[dict[str, object]]:
    return [
        {
            "id": new_id("fr"),
            "tenant_id": tenant_id,
            "request_id": request_id,
            "replica": replica,
            "instance_type": instance_type,
            "chip_us": chip_us,
            "finished_at": finished_at,
        }
        for tenant_id, request_id, replica, instance_type, chip_us, finished_at in receipts
    ]
