"""Fleet busy time: what the replicas computed, for reconciliation against the usage attributed to requests.

``record_fleet_busy`` adds an increment to the row of ``(replica, minute)``; the processes that run replicas
call it through ``inference.busy.FleetBusyRecorder``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.billing.sql import dialect_name
from switchyard.platform.db import new_id
from switchyard.platform.models import FleetBusy, utc_now

__all__ = ["minute_of", "record_fleet_busy"]


def minute_of(moment: datetime) -> datetime:
    """The UTC minute ``moment`` falls in: the slice its busy time is recorded under."""
    return moment.replace(second=0, microsecond=0)


async def record_fleet_busy(
    session: AsyncSession,
    *,
    replica: str,
    instance_type: str,
    chip_us: int,
    period_start: datetime,
    undelivered_chip_us: int = 0,
) -> None:
    """Add ``chip_us`` busy chip-µs of ``replica``, and ``undelivered_chip_us`` of its busy time whose receipt never
    reached a gateway, to its slice starting ``period_start``. Reconciliation sums slices by ``period_start``
    month."""
    if chip_us < 0 or undelivered_chip_us < 0:
        raise ValueError("chip_us and undelivered_chip_us must be >= 0")
    module = postgresql if dialect_name(session) == "postgresql" else sqlite
    insert = module.insert(FleetBusy).values(
        id=new_id("fb"),
        replica=replica,
        instance_type=instance_type,
        chip_us=chip_us,
        undelivered_chip_us=undelivered_chip_us,
        period_start=period_start,
        recorded_at=utc_now(),
    )
    table = FleetBusy.__table__.c  # type: ignore[attr-defined]
    await session.execute(
        insert.on_conflict_do_update(
            index_elements=["replica", "period_start"],
            set_={
                "chip_us": table.chip_us + insert.excluded.chip_us,
                "undelivered_chip_us": table.undelivered_chip_us + insert.excluded.undelivered_chip_us,
                "recorded_at": insert.excluded.recorded_at,
            },
        )
    )
