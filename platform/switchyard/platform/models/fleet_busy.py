from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["FleetBusy"]


class FleetBusy(SQLModel, table=True):
    """Busy chip-microseconds of one replica over one minute, written by the process that runs the replica.

    Reconciliation compares these with the receipts the replicas issued (``FleetReceipt``). ``(replica,
    period_start)`` is unique: each flush adds its increment to the minute's row in the transaction that
    records it.
    """

    __tablename__ = "fleet_busy"
    __table_args__ = (UniqueConstraint("replica", "period_start", name="uq_fleet_busy_slice"),)

    id: str = Field(primary_key=True, max_length=40)
    replica: str = Field(max_length=128)
    instance_type: str = Field(max_length=64)
    chip_us: int = Field(sa_type=BigInteger)
    period_start: datetime = Field(sa_type=UTCDateTime, index=True)
    recorded_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
