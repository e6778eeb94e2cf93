from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Credit"]


class Credit(TenantOwned, table=True):
    """An amount an operator grants a tenant; it becomes a ``credit`` line (negative) of the tenant's next
    finalized invoice. ``invoice_line_id`` is set when an invoice claims it, so it is applied exactly once."""

    __tablename__ = "credits"

    id: str = Field(primary_key=True, max_length=40)
    amount_minor: int = Field(sa_type=BigInteger, description="Positive, in minor units of `currency`.")
    currency: str = Field(max_length=3)
    reason: str = Field(max_length=300)
    granted_by: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    invoice_line_id: str | None = Field(default=None, index=True, max_length=40)
