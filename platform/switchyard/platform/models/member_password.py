from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["MemberPassword"]


class MemberPassword(TenantOwned, table=True):
    """A member's console password: only its argon2 hash is stored; removing the member removes it."""

    __tablename__ = "member_passwords"

    member_id: str = Field(primary_key=True, foreign_key="members.id", ondelete="CASCADE", max_length=40)
    password_hash: str = Field(max_length=255)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
