"""Fleet busy time: what the accelerator pool reports, for reconciliation against attributed usage."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.billing.sql import insert_ignore
from switchyard.platform.db import new_id
from switchyard.platform.models import FleetBusy, utc_now

__all__ = ["record_fleet_busy"]


async def record_fleet_busy(
    session: AsyncSession, *, replica: str, instance_type: str, chip_us: int, period_start: datetime
) -> bool:
    """Record the busy chip-microseconds of one replica over the time slice starting ``period_start``.

    The pool calls this in its own unit of work once per (replica, slice), e.g. each minute: busy time is
    each engine iteration's duration times the replica's chips, the same quantity that is split across the
    iteration's requests into their receipts. ``(replica, period_start)`` is unique, so a slice reported
    twice is stored once (returns ``False``). Reconciliation sums slices by ``period_start`` month; put a
    slice in the month its requests complete in (slices should not straddle a month boundary).
    """
    if chip_us < 0:
        raise ValueError("chip_us must be >= 0")
    row = {
        "id": new_id("fb"),
        "replica": replica,
        "instance_type": instance_type,
        "chip_us": chip_us,
        "period_start": period_start,
        "recorded_at": utc_now(),
    }
    statement = insert_ignore(session, FleetBusy, ["replica", "period_start"]).values([row]).returning(FleetBusy.id)
    return len((await session.execute(statement)).all()) == 1
