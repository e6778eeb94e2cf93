from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["RunEventRecord"]


class RunEventRecord(TenantOwned, table=True):
    """One stored SSE event of a run, numbered 1, 2, 3, ... (``sequence_number``, unique per run).

    Written in the transaction that stores the run state it describes, so a late subscriber replays exactly
    what happened, once.
    """

    __tablename__ = "run_events"
    __table_args__ = (UniqueConstraint("run_id", "sequence_number", name="uq_run_events_sequence"),)

    id: str = Field(primary_key=True, max_length=40)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=40)
    sequence_number: int
    event: str = Field(max_length=64)
    data: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
