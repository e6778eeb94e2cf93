from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["TenantTurn"]


class TenantTurn(TenantOwned, table=True):
    """When a worker last took one of the tenant's background jobs (a run or a background response).

    The workers serve the tenant served least recently first (``execution/turns.py``), so that one tenant's backlog
    delays another tenant's job by at most one job per worker slot. One row per tenant, written in the
    transaction that takes the job's lease.
    """

    __tablename__ = "tenant_turns"

    tenant_id: str = Field(primary_key=True, foreign_key="tenants.id", max_length=40)
    served_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
