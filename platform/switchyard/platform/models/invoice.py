from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Invoice"]


class Invoice(TenantOwned, table=True):
    """A tenant's bill for one calendar month UTC ``[period_start, period_end)``: ``draft`` → ``finalized``.

    A draft's lines are computed from the ledger when read; finalizing stores the lines, links every billed
    usage event to its line and fixes ``total_minor``. A finalized invoice never changes.
    """

    __tablename__ = "invoices"
    __table_args__ = (UniqueConstraint("tenant_id", "period_start", name="uq_invoices_tenant_period"),)

    id: str = Field(primary_key=True, max_length=40)
    period_start: datetime = Field(sa_type=UTCDateTime)
    period_end: datetime = Field(sa_type=UTCDateTime)
    status: str = Field(default="draft", max_length=16, index=True)
    currency: str = Field(max_length=3)
    total_minor: int | None = Field(default=None, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    finalized_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
