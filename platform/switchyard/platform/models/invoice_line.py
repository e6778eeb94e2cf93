from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime
from switchyard.platform.models.decimal_text import DecimalText

__all__ = ["InvoiceLine"]


class InvoiceLine(TenantOwned, table=True):
    """One line of a finalized invoice: the usage of one (instance type, model), rounded once (half-up).

    ``kind`` is ``usage`` for the invoice's own month, ``adjustment`` for usage of an earlier, already
    finalized month that arrived late (``usage_period_start`` says which month).
    """

    __tablename__ = "invoice_lines"

    id: str = Field(primary_key=True, max_length=40)
    invoice_id: str = Field(foreign_key="invoices.id", index=True, max_length=40)
    position: int
    kind: str = Field(max_length=16)
    instance_type: str = Field(max_length=64)
    model: str = Field(max_length=200)
    usage_period_start: datetime = Field(sa_type=UTCDateTime)
    chip_us: int = Field(sa_type=BigInteger)
    event_count: int
    unit_price: Decimal | None = Field(default=None, sa_type=DecimalText, description="Null when rates mixed.")
    currency: str = Field(max_length=3)
    amount_minor: int = Field(sa_type=BigInteger)
    description: str = Field(max_length=300)
