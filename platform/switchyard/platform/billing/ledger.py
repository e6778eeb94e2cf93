"""The usage ledger: compute receipts in, rated usage events out.

``record_usage`` is the outbox write: call it in the same unit of work that records the request (or run
step) that produced the receipt, so the usage exists if and only if the request does. Rating happens later,
in Celery (``billing.rate_events``), and is idempotent: it only moves ``pending``/``unpriced`` events.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy import Connection, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.errors import NoApplicablePrice
from switchyard.platform.billing.invoices import ensure_drafts
from switchyard.platform.billing.periods import hour_start, month_start
from switchyard.platform.billing.rates import cards_for, choose_card, tenant_tier_of
from switchyard.platform.billing.sql import dialect_name, insert_ignore_for
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.db.direct import DirectWriter
from switchyard.platform.db.inline import insert_rows
from switchyard.platform.models import RateCard, UsageEvent, utc_now

__all__ = [
    "RatingResult",
    "UsageEventCreate",
    "rate_events",
    "record_usage",
    "record_usage_bulk",
    "record_usage_direct",
    "record_usage_sync",
]

log = logging.getLogger(__name__)

RATABLE = ("pending", "unpriced")


class UsageEventCreate(BaseModel):
    """One compute receipt as the pool reports it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_id: str = Field(min_length=1, max_length=128, description="Unique per tenant, e.g. the request id.")
    api_key_id: str | None = Field(default=None, max_length=40)
    agent_id: str | None = Field(default=None, max_length=40)
    agent_version: int | None = Field(default=None, ge=0)
    run_id: str | None = Field(default=None, max_length=40)
    workflow_id: str | None = Field(
        default=None, max_length=40, description="The workflow whose run made the request (none outside one)."
    )
    model: str = Field(min_length=1, max_length=200)
    instance_type: str = Field(min_length=1, max_length=64)
    chip_us: int = Field(ge=0, description="Chip-microseconds attributed to the request.")
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(
        default=0, ge=0, description="Of the prompt tokens, those the replica read from its prefix cache."
    )
    cache_saved_chip_us: int = Field(
        default=0, ge=0, description="What computing the cached tokens would have cost beyond reading them (estimate)."
    )
    occurred_at: AwareDatetime = Field(description="When the request completed (UTC, microseconds).")


def _row(scope: TenantScope, event: UsageEventCreate, now: datetime) -> dict[str, object]:
    return {
        "id": new_id("use"),
        "tenant_id": scope.tenant_id,
        "event_id": event.event_id,
        "api_key_id": event.api_key_id,
        "agent_id": event.agent_id,
        "agent_version": event.agent_version,
        "run_id": event.run_id,
        "workflow_id": event.workflow_id,
        "model": event.model,
        "instance_type": event.instance_type,
        "chip_us": event.chip_us,
        "prompt_tokens": event.prompt_tokens,
        "completion_tokens": event.completion_tokens,
        "cached_tokens": event.cached_tokens,
        "cache_saved_chip_us": event.cache_saved_chip_us,
        "occurred_at": event.occurred_at,
        "hour_start": hour_start(event.occurred_at),
        "period_start": month_start(event.occurred_at),
        "recorded_at": now,
        "status": "pending",
    }


async def record_usage_bulk(
    session: AsyncSession, *, scope: TenantScope, events: Sequence[UsageEventCreate]
) -> tuple[int, int]:
    """Insert receipts of one tenant in the caller's transaction; returns ``(inserted, duplicates)``.

    ``(tenant, event_id)`` is unique in the database and the insert is ``ON CONFLICT DO NOTHING``, so a
    receipt recorded twice (a retry, a redelivered message) is stored once and counted as a duplicate.
    """
    if not events:
        return 0, 0
    now = utc_now()
    rows = [_row(scope, event, now) for event in events]
    # One statement with the rows as parameters: SQLAlchemy batches them ("insertmanyvalues", within the
    # databases' bound-parameter limits) and compiles the statement once, whatever the number of rows.
    inserted = len((await session.execute(_usage_insert(dialect_name(session)), rows)).all())
    return inserted, len(events) - inserted


_IGNORE_DUPLICATE = "(tenant_id, event_id) DO NOTHING"


def record_usage_sync(connection: Connection, receipts: Sequence[tuple[TenantScope, UsageEventCreate]]) -> int:
    """``record_usage_bulk`` for receipts of any tenants, on a synchronous SQLite connection; returns how many were
    new. For the gateway's inline SQLite writes (``db.inline``), on the event loop's thread."""
    return insert_rows(connection, "usage_events", _rows(receipts), on_conflict=_IGNORE_DUPLICATE)


async def record_usage_direct(writer: DirectWriter, receipts: Sequence[tuple[TenantScope, UsageEventCreate]]) -> int:
    """``record_usage_bulk`` for receipts of any tenants, on PostgreSQL's kept connection (``db.direct``); returns
    how many were new. For the gateway's metering."""
    return await writer.insert("usage_events", _rows(receipts), on_conflict=_IGNORE_DUPLICATE)


def _rows(receipts: Sequence[tuple[TenantScope, UsageEventCreate]]) -> list[dict[str, object]]:
    now = utc_now()
    return [_row(scope, event, now) for scope, event in receipts]


@cache
def _usage_insert(dialect: str) -> Any:
    """The receipt insert of a dialect, built once (its compiled form is cached by SQLAlchemy)."""
    return insert_ignore_for(dialect, UsageEvent, ["tenant_id", "event_id"]).returning(col(UsageEvent.event_id))


async def record_usage(session: AsyncSession, *, scope: TenantScope, event: UsageEventCreate) -> bool:
    """Insert one receipt in the caller's transaction (the outbox); ``True`` if new, ``False`` if a duplicate."""
    inserted, _ = await record_usage_bulk(session, scope=scope, events=[event])
    return inserted == 1


@dataclass
class RatingResult:
    """What one rating pass did: ``touched`` (tenant, month) drafts changed, ``hours`` (tenant, hour) buckets."""

    rated: int = 0
    unpriced: int = 0
    touched: set[tuple[str, datetime]] = field(default_factory=set)
    hours: set[tuple[str, datetime]] = field(default_factory=set)


async def rate_events(
    session: AsyncSession, *, event_ids: Sequence[str] | None = None, limit: int = 500
) -> RatingResult:
    """Price pending (and previously unpriced) events with the card effective at their ``occurred_at``.

    Runs on an unscoped session (a job). Each update is conditional on the event still being ratable, so
    running it twice (a redelivered task) changes nothing the second time. Each rated event's month gets a
    draft invoice (or the next open month, when its own is finalized: the event becomes an adjustment).
    An event with no applicable card becomes ``unpriced`` with the reason, is logged as an error, and is
    retried by the sweeper.
    """
    statement = select(UsageEvent).where(col(UsageEvent.status).in_(RATABLE)).order_by(col(UsageEvent.id)).limit(limit)
    if event_ids is not None:
        statement = statement.where(col(UsageEvent.id).in_(list(event_ids)))
    events = list((await session.execute(statement)).scalars())
    result = RatingResult()
    cards: dict[str, list[RateCard]] = {}
    now = utc_now()
    for event in events:
        if event.instance_type not in cards:
            cards[event.instance_type] = await cards_for(session, instance_type=event.instance_type)
        tier = await tenant_tier_of(session, tenant_id=event.tenant_id)
        card = choose_card(cards[event.instance_type], model=event.model, tenant_tier=tier, at=event.occurred_at)
        if card is None:
            error = NoApplicablePrice(
                f"no rate card for {event.instance_type!r}/{event.model!r}/{tier!r} at {event.occurred_at.isoformat()}"
            )
            log.error("usage event %s of tenant %s is unpriced: %s", event.id, event.tenant_id, error)
            values: dict[str, object] = {"status": "unpriced", "rating_error": str(error)[:500]}
            result.unpriced += 1
        else:
            values = {
                "status": "rated",
                "rate_card_id": card.id,
                "price_per_chip_hour": card.price_per_chip_hour,
                "currency": card.currency,
                "rating_error": None,
                "rated_at": now,
            }
        changed = await session.execute(
            update(UsageEvent)
            .where(col(UsageEvent.id) == event.id, col(UsageEvent.status).in_(RATABLE))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if card is not None and changed.rowcount == 1:  # type: ignore[attr-defined]
            result.rated += 1
            result.touched.add((event.tenant_id, event.period_start))
            result.hours.add((event.tenant_id, event.hour_start))
    await ensure_drafts(session, result.touched)
    return result
