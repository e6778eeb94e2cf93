from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["AuditEvent"]


class AuditEvent(TenantOwned, table=True):
    """One mutation, written in the same transaction as the change it records."""

    __tablename__ = "audit_events"

    id: str = Field(primary_key=True, max_length=40)
    actor: str = Field(max_length=64, description="Id of the API or operator key that made the change.")
    action: str = Field(max_length=64, description="Dotted verb, e.g. `api_key.create`.")
    target_type: str = Field(max_length=32)
    target_id: str = Field(max_length=40)
    details: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    request_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
