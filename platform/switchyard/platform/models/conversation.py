from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Conversation", "ConversationItem"]


class Conversation(TenantOwned, table=True):
    """A ``/v1/conversations`` conversation: the durable item list a response's ``conversation`` points to."""

    __tablename__ = "conversations"

    id: str = Field(primary_key=True, max_length=40)
    metadata_json: dict[str, str] = Field(default_factory=dict, sa_type=JSON)
    next_position: int = Field(
        default=0,
        description="The position the next item appended takes (``db.positions.take_positions``).",
    )
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ConversationItem(TenantOwned, table=True):
    """One item of a conversation (OpenAI's item JSON in ``item``), in ``position`` order (unique per
    conversation). Items a response adds are written in the transaction that finishes the response."""

    __tablename__ = "conversation_items"
    __table_args__ = (UniqueConstraint("conversation_id", "position", name="uq_conversation_items_position"),)

    row_id: str = Field(primary_key=True, max_length=40)
    id: str = Field(index=True, max_length=128, description="the item's id as clients see it")
    conversation_id: str = Field(foreign_key="conversations.id", index=True, max_length=40)
    position: int
    response_id: str | None = Field(default=None, max_length=40)
    item: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
