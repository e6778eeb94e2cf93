from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Run"]


class Run(TenantOwned, table=True):
    """A run of one agent version over a thread; ``state`` is the run loop's checkpoint (``RunState`` JSON).

    ``revision`` mirrors ``state.revision`` and guards every write (optimistic locking). A worker holds the
    run while ``lease_expires_at`` is in the future; the sweeper re-enqueues active runs whose lease passed.
    """

    __tablename__ = "runs"

    id: str = Field(primary_key=True, max_length=40)
    thread_id: str = Field(foreign_key="threads.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", index=True, max_length=40)
    agent_version: int
    api_key_id: str | None = Field(default=None, max_length=40)
    status: str = Field(default="queued", max_length=16, index=True)
    cancel_requested: bool = Field(default=False)
    state: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    revision: int = Field(default=0)
    history_position: int = Field(default=-1, description="thread messages up to this position are its input")
    metadata_json: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    chip_us: int = Field(default=0, sa_type=BigInteger)
    input_tokens: int = Field(default=0)
    output_tokens: int = Field(default=0)
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    attempts: int = Field(default=0, description="times a worker picked the run up")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
