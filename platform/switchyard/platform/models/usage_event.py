from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from switchyard.platform.models.base import TenantOwned, UTCDateTime, utc_now
from switchyard.platform.models.decimal_text import DecimalText

__all__ = ["UsageEvent"]


class UsageEvent(TenantOwned, table=True):
    """One compute receipt in the usage ledger (the billing outbox).

    Written in the transaction that completed the request; ``(tenant_id, event_id)`` is unique, so a receipt
    recorded twice is stored once. ``status`` goes ``pending`` → ``rated`` (price fixed from the rate card
    effective at ``occurred_at``) or ``unpriced`` (no applicable card: retried by the sweeper, reported by
    reconciliation). ``invoice_line_id`` is set once, when a finalized invoice bills the event.
    """

    __tablename__ = "usage_events"
    __table_args__ = (UniqueConstraint("tenant_id", "event_id", name="uq_usage_events_tenant_event"),)

    id: str = Field(primary_key=True, max_length=40)
    event_id: str = Field(max_length=128, description="Caller's idempotency key, e.g. the request id.")
    api_key_id: str | None = Field(default=None, max_length=40)
    agent_id: str | None = Field(default=None, max_length=40)
    agent_version: int | None = Field(default=None)
    run_id: str | None = Field(default=None, max_length=40)
    workflow_id: str | None = Field(
        default=None, max_length=40, description="The workflow whose run spent it (null outside workflow runs)."
    )
    model: str = Field(max_length=200)
    instance_type: str = Field(max_length=64)
    chip_us: int = Field(sa_type=BigInteger, description="Accelerator chip-microseconds attributed to the request.")
    prompt_tokens: int = Field(default=0)
    completion_tokens: int = Field(default=0)
    cached_tokens: int = Field(
        default=0,
        description="Of prompt_tokens, those read from the replica's prefix cache (their cost is in chip_us).",
    )
    cache_saved_chip_us: int = Field(
        default=0,
        sa_type=BigInteger,
        description="What computing the cached tokens would have cost beyond reading them: an estimate, not billed.",
    )
    occurred_at: datetime = Field(sa_type=UTCDateTime, index=True)
    hour_start: datetime = Field(sa_type=UTCDateTime, description="`occurred_at` truncated to the hour (UTC).")
    period_start: datetime = Field(sa_type=UTCDateTime, description="First instant of the billing month (UTC).")
    recorded_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    status: str = Field(default="pending", max_length=16, index=True)
    rate_card_id: str | None = Field(default=None, max_length=40)
    price_per_chip_hour: Decimal | None = Field(default=None, sa_type=DecimalText)
    currency: str | None = Field(default=None, max_length=3)
    rating_error: str | None = Field(default=None, max_length=500)
    rated_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    invoice_line_id: str | None = Field(default=None, max_length=40, index=True)
