from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["MemberPasswordReset"]


class MemberPasswordReset(TenantOwned, table=True):
    """A password-reset link for a member: the link holds a secret whose SHA-256 is ``token_sha256``; following
    it before ``expires_at`` replaces the member's password once (``used_at``). A member has at most one live
    link: issuing another deletes the older ones."""

    __tablename__ = "member_password_resets"

    id: str = Field(primary_key=True, max_length=40)
    token_sha256: str = Field(unique=True, max_length=64)
    member_id: str = Field(foreign_key="members.id", ondelete="CASCADE", index=True, max_length=40)
    issued_by: str = Field(
        max_length=40, description="The issuing member's id, or the member's own when asked by mail."
    )
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
