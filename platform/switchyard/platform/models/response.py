from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["ResponseEventRecord", "ResponseRecord"]


class ResponseRecord(TenantOwned, table=True):
    """A ``/v1/responses`` response: its request, its input items, and the run loop's checkpoint (``state``).

    ``output`` is derived from ``state`` at every checkpoint; ``revision`` mirrors ``state.revision`` and guards
    every write, and a process drives the response while ``lease_expires_at`` is in the future, as for runs.
    ``stored`` is the request's ``store``: an unstored response is kept only for its books (never shown).
    """

    __tablename__ = "responses"

    id: str = Field(primary_key=True, max_length=40)
    api_key_id: str | None = Field(default=None, max_length=40)
    agent_id: str | None = Field(default=None, max_length=40)
    agent_version: int | None = None
    conversation_id: str | None = Field(default=None, index=True, max_length=40)
    previous_response_id: str | None = Field(default=None, max_length=40)
    model: str = Field(max_length=256)
    status: str = Field(default="queued", max_length=16, index=True)
    background: bool = Field(default=False)
    stored: bool = Field(default=True)
    cancel_requested: bool = Field(default=False)
    request: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    input_items: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    output: list[dict[str, Any]] = Field(default_factory=list, sa_type=JSON)
    state: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    revision: int = Field(default=0)
    chip_us: int = Field(default=0, sa_type=BigInteger)
    input_tokens: int = Field(default=0)
    output_tokens: int = Field(default=0)
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class ResponseEventRecord(TenantOwned, table=True):
    """One stored stream event of a background response, numbered 1, 2, 3, ... (``sequence_number``).

    Written in the transaction that checkpoints the state it describes, so a client resuming with
    ``starting_after`` reads exactly what happened, once.
    """

    __tablename__ = "response_events"
    __table_args__ = (UniqueConstraint("response_id", "sequence_number", name="uq_response_events_sequence"),)

    id: str = Field(primary_key=True, max_length=40)
    response_id: str = Field(foreign_key="responses.id", index=True, max_length=40)
    sequence_number: int
    event: str = Field(max_length=64)
    data: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
