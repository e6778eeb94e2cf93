from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["MemberInvitation"]


class MemberInvitation(TenantOwned, table=True):
    """An invitation link for a member without a password: the link holds a secret whose SHA-256 is
    ``token_sha256``; following it before ``expires_at`` sets the member's password once (``accepted_at``)."""

    __tablename__ = "member_invitations"

    id: str = Field(primary_key=True, max_length=40)
    token_sha256: str = Field(unique=True, max_length=64)
    member_id: str = Field(foreign_key="members.id", ondelete="CASCADE", index=True, max_length=40)
    invited_by: str = Field(max_length=40, description="The inviting member's id.")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    accepted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
