from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["ApiKey", "KeyColumns"]


class KeyColumns(SQLModel):
    """Columns shared by tenant and operator keys: only the SHA-256 of the secret is stored."""

    id: str = Field(primary_key=True, max_length=40)
    name: str = Field(default="", max_length=200)
    short_id: str = Field(unique=True, max_length=32)
    secret_sha256: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(
        default=None, sa_type=UTCDateTime, description="When the key last authenticated a request (to the minute)."
    )


class ApiKey(KeyColumns, TenantOwned, table=True):
    """A tenant's API key, acting with one member role."""

    __tablename__ = "api_keys"

    role: str = Field(max_length=20)
