from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Thread"]


class Thread(TenantOwned, table=True):
    """A conversation: ordered messages (``thread_messages``) and the runs over them.

    Deleting a thread hides it (``deleted_at``); its runs' usage stays attributed.
    """

    __tablename__ = "threads"

    id: str = Field(primary_key=True, max_length=40)
    metadata_json: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    next_position: int = Field(
        default=0, description="The position the next message appended takes (``db.positions.take_positions``)."
    )
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
