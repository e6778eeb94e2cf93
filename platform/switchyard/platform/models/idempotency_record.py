from __future__ import annotations

from datetime import datetime

from sqlalchemy import LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now

__all__ = ["IdempotencyRecord"]


class IdempotencyRecord(SQLModel, table=True):
    """The first successful (2xx) response to a POST with an ``Idempotency-Key``, replayed to retries for a day.

    Scoped to the API key that sent it (``api_key_id``: a tenant or operator key), so another key, even of the
    same tenant, never meets it. A row with no ``status_code`` is a request still in flight. The response is kept
    only sealed (``http.replay_seal``): readable with the secret of the key that asked, which is never stored.
    """

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("api_key_id", "key", name="uq_idempotency_api_key_key"),)

    id: str = Field(primary_key=True, max_length=40)
    api_key_id: str = Field(max_length=40)
    key: str = Field(max_length=255)
    request_sha256: str = Field(max_length=64)
    status_code: int | None = Field(default=None)
    response_sealed: bytes | None = Field(
        default=None, sa_type=LargeBinary, description="AES-GCM nonce + ciphertext of the stored headers and body."
    )
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
