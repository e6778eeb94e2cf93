from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["OperatorAccount", "OperatorConsoleSession"]


class OperatorAccount(SQLModel, table=True):
    """A platform operator's console sign-in (email and argon2 hash); operator keys stay the API's credential."""

    __tablename__ = "operator_accounts"

    id: str = Field(primary_key=True, max_length=40)
    email: str = Field(unique=True, max_length=320)
    password_hash: str = Field(max_length=255)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    disabled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class OperatorConsoleSession(SQLModel, table=True):
    """A signed-in operator's console session, kept as a member's is (``ConsoleSession``) but outside any tenant."""

    __tablename__ = "operator_console_sessions"

    id: str = Field(primary_key=True, max_length=40)
    token_sha256: str = Field(unique=True, max_length=64)
    operator_id: str = Field(foreign_key="operator_accounts.id", ondelete="CASCADE", index=True, max_length=40)
    csrf_token: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    last_seen_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
