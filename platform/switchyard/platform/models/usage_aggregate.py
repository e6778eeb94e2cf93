from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now

__all__ = ["UsageAggregate"]


class UsageAggregate(TenantOwned, table=True):
    """Usage of one tenant in one UTC hour or day per (API key, agent, workflow, model, instance type).

    A roll-up of ``usage_events`` kept by the ``billing.aggregate`` job, which recomputes whole buckets from
    the ledger (so running it twice, or late, gives the same rows). Empty ``api_key_id``/``agent_id``/``workflow_id``
    mean the events had none (the columns are part of the unique key, where NULLs would never collide).
    """

    __tablename__ = "usage_aggregates"
    __table_args__ = (
        UniqueConstraint(
            "tenant_id",
            "bucket_width",
            "bucket_start",
            "api_key_id",
            "agent_id",
            "workflow_id",
            "model",
            "instance_type",
            name="uq_usage_aggregates_bucket",
        ),
    )

    id: str = Field(primary_key=True, max_length=40)
    bucket_width: str = Field(max_length=2, description="`1h` or `1d`.")
    bucket_start: datetime = Field(sa_type=UTCDateTime)
    api_key_id: str = Field(default="", max_length=40)
    agent_id: str = Field(default="", max_length=40)
    workflow_id: str = Field(default="", max_length=40)
    model: str = Field(max_length=200)
    instance_type: str = Field(max_length=64)
    chip_us: int = Field(sa_type=BigInteger)
    prompt_tokens: int = Field(sa_type=BigInteger)
    completion_tokens: int = Field(sa_type=BigInteger)
    cached_tokens: int = Field(default=0, sa_type=BigInteger)
    cache_saved_chip_us: int = Field(default=0, sa_type=BigInteger)
    event_count: int = Field(sa_type=BigInteger)
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
