from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["BudgetAlert"]


class BudgetAlert(TenantOwned, table=True):
    """A soft alert (50/80/100 % of a budget) fired once per budget and month: the unique key makes it so."""

    __tablename__ = "budget_alerts"
    __table_args__ = (UniqueConstraint("budget_id", "period_start", "threshold_pct", name="uq_budget_alerts_once"),)

    id: str = Field(primary_key=True, max_length=40)
    budget_id: str = Field(max_length=40, index=True)
    period_start: datetime = Field(sa_type=UTCDateTime)
    threshold_pct: int
    spent_micros: int = Field(sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
