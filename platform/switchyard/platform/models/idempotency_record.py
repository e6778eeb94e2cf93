from __future__ import annotations

from datetime import datetime

from sqlalchemy import LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["IdempotencyRecord"]


class IdempotencyRecord(SQLModel, table=True):
    """The first response to a POST with an ``Idempotency-Key``, replayed to retries for a day.

    ``owner`` is the tenant id (or the operator key id), so keys of different tenants never meet.
    A row with no ``status_code`` is a request still in flight.
    """

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("owner", "key", name="uq_idempotency_owner_key"),)

    id: str = Field(primary_key=True, max_length=40)
    owner: str = Field(max_length=40)
    key: str = Field(max_length=255)
    request_sha256: str = Field(max_length=64)
    status_code: int | None = Field(default=None)
    content_type: str | None = Field(default=None, max_length=200)
    response_body: bytes | None = Field(default=None, sa_type=LargeBinary)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
