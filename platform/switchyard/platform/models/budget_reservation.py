from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import JSON, BigInteger
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now
from switchyard.platform.models.decimal_text import DecimalText

__all__ = ["BudgetReservation"]


class BudgetReservation(TenantOwned, table=True):
    """Money held against budgets at admission: ``held`` → ``settled`` | ``released`` | ``expired``."""

    __tablename__ = "budget_reservations"

    id: str = Field(primary_key=True, max_length=40)
    budget_ids: list[str] = Field(default_factory=list, sa_type=JSON)
    api_key_id: str | None = Field(default=None, max_length=40)
    agent_id: str | None = Field(default=None, max_length=40)
    model: str = Field(max_length=200)
    instance_type: str = Field(max_length=64)
    currency: str = Field(max_length=3)
    price_per_chip_hour: Decimal = Field(sa_type=DecimalText)
    estimated_chip_us: int = Field(sa_type=BigInteger)
    amount_micros: int = Field(sa_type=BigInteger, description="Held amount: the estimate's cost, rounded up.")
    actual_chip_us: int | None = Field(default=None, sa_type=BigInteger)
    actual_micros: int | None = Field(default=None, sa_type=BigInteger)
    status: str = Field(default="held", max_length=16, index=True)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
    closed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
