from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["Budget"]


class Budget(TenantOwned, table=True):
    """A monthly spending limit for a tenant, one of its API keys, one of its agents or one of its workflows.

    Money is tracked in micro-units of ``currency`` (10^-6 of the major unit) so that sub-cent request costs
    add up without rounding each request to a cent; the limit is set in minor units. ``spent_micros`` and
    ``reserved_micros`` belong to the month starting ``period_start`` and reset when a new month begins.
    """

    __tablename__ = "budgets"
    __table_args__ = (UniqueConstraint("tenant_id", "scope_kind", "scope_ref", name="uq_budgets_scope"),)

    id: str = Field(primary_key=True, max_length=40)
    scope_kind: str = Field(max_length=16, description="`tenant`, `api_key`, `agent` or `workflow`.")
    scope_ref: str = Field(default="", max_length=40, description="Key, agent or workflow id; empty for the tenant.")
    currency: str = Field(max_length=3)
    limit_minor: int = Field(sa_type=BigInteger)
    hard: bool = Field(default=True, description="Refuse requests past the limit (else only alert).")
    alert_thresholds: list[int] | None = Field(
        default=None, sa_type=JSON, description="Percentages of the limit that alert once a month; null: 50, 80, 100."
    )
    period_start: datetime = Field(sa_type=UTCDateTime)
    spent_micros: int = Field(default=0, sa_type=BigInteger)
    reserved_micros: int = Field(default=0, sa_type=BigInteger)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
