from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Text, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["ThreadMessage"]


class ThreadMessage(TenantOwned, table=True):
    """One message of a thread, in ``position`` order (unique per thread).

    Messages a run produces keep the run loop's ids (``msg_<step id>``) and are written in the transaction
    that checkpoints the run state holding them.
    """

    __tablename__ = "thread_messages"
    __table_args__ = (UniqueConstraint("thread_id", "position", name="uq_thread_messages_position"),)

    id: str = Field(primary_key=True, max_length=64)
    thread_id: str = Field(foreign_key="threads.id", index=True, max_length=40)
    run_id: str | None = Field(default=None, max_length=40)
    position: int = Field(description="0, 1, 2, ... within the thread")
    role: str = Field(max_length=16)
    content: str | None = Field(default=None, sa_type=Text)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    tool_call_id: str | None = Field(default=None, max_length=128)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
