from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime

__all__ = ["FleetReceipt"]


class FleetReceipt(SQLModel, table=True):
    """One compute receipt as the process that ran the request issued it (not the gateway that received it).

    Reconciliation matches these to usage events by ``(tenant_id, request_id)``: a receipt with no usage event is
    compute that never reached the books (its gateway died, or its commit failed), named and not billed; a
    request run twice under one id (an agent step repeated after a crash) has two receipts and one usage event.
    """

    __tablename__ = "fleet_receipts"
    __table_args__ = (Index("ix_fleet_receipts_request", "tenant_id", "request_id"),)

    id: str = Field(primary_key=True, max_length=40)
    tenant_id: str = Field(max_length=40)
    request_id: str = Field(max_length=128)
    replica: str = Field(max_length=128)
    instance_type: str = Field(max_length=64)
    chip_us: int = Field(sa_type=BigInteger)
    finished_at: datetime = Field(sa_type=UTCDateTime, index=True)
