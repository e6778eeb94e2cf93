from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Member"]


class Member(TenantOwned, table=True):
    """A person in a tenant, with one role (owner, admin, developer, viewer)."""

    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("tenant_id", "email", name="uq_members_tenant_email"),)

    id: str = Field(primary_key=True, max_length=40)
    email: str = Field(max_length=320)
    role: str = Field(max_length=20)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
