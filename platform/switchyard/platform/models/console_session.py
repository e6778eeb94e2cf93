from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["ConsoleSession"]


class ConsoleSession(TenantOwned, table=True):
    """A signed-in member's console session: the cookie holds a secret whose SHA-256 is ``token_sha256``.

    A session is valid until ``expires_at`` (absolute), while ``last_seen_at`` is recent (idle timeout) and
    until it is signed out (``ended_at``); ``csrf_token`` is what every form of the session must send back.
    """

    __tablename__ = "console_sessions"

    id: str = Field(primary_key=True, max_length=40)
    token_sha256: str = Field(unique=True, max_length=64)
    member_id: str = Field(foreign_key="members.id", ondelete="CASCADE", index=True, max_length=40)
    csrf_token: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    last_seen_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
