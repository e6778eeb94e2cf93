from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from switchyard.platform.models.base import UTCDateTime, utc_now
from switchyard.platform.models.decimal_text import DecimalText

__all__ = ["ANY", "RateCard"]

ANY = "*"
"""Wildcard for ``model`` and ``tenant_tier``: the card applies to every value."""


class RateCard(SQLModel, table=True):
    """A price per chip-hour for one instance type (optionally one model and tenant tier) from ``effective_from``.

    Rows are never updated: a price change is a new row with a later ``effective_from``. The card used for an
    event is the most specific one (model, then tier) whose ``effective_from`` is the latest at or before the
    event's ``occurred_at``.
    """

    __tablename__ = "rate_cards"
    __table_args__ = (
        UniqueConstraint("instance_type", "model", "tenant_tier", "effective_from", name="uq_rate_cards_version"),
    )

    id: str = Field(primary_key=True, max_length=40)
    instance_type: str = Field(max_length=64, index=True, description="Instance type as AWS spells it.")
    model: str = Field(default=ANY, max_length=200, description="Model name, or `*` for every model.")
    tenant_tier: str = Field(default=ANY, max_length=32, description="Tenant tier, or `*` for every tier.")
    currency: str = Field(max_length=3, description="ISO 4217 code of the price.")
    price_per_chip_hour: Decimal = Field(sa_type=DecimalText, description="Exact price of one chip-hour.")
    effective_from: datetime = Field(sa_type=UTCDateTime)
    source: str = Field(default="", max_length=500, description="Where the price comes from.")
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
