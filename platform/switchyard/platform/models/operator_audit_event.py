from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["OperatorAuditEvent"]


class OperatorAuditEvent(SQLModel, table=True):
    """One operator action (rate cards, fleet, tenants, credits), written in the same transaction as the change.

    Platform-wide, not tenant-owned: a tenant's own log (``audit_events``) also records what an operator did to it.
    """

    __tablename__ = "operator_audit_events"

    id: str = Field(primary_key=True, max_length=40)
    actor: str = Field(max_length=64, description="Id of the operator key that made the change.")
    action: str = Field(max_length=64, index=True, description="Dotted verb, e.g. `rate_card.create`.")
    target_type: str = Field(max_length=32)
    target_id: str = Field(max_length=64)
    details: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    request_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
