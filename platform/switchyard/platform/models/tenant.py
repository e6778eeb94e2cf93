from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["Tenant"]


class Tenant(SQLModel, table=True):
    """An organisation using the platform: the unit of isolation and billing."""

    __tablename__ = "tenants"

    id: str = Field(primary_key=True, max_length=40)
    name: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    suspended_at: datetime | None = Field(
        default=None,
        sa_type=UTCDateTime,
        description="When an operator suspended the tenant (its API keys and console sessions stop working); "
        "None while it is active.",
    )
