"""Celery jobs of billing (named ``billing.<verb>``). Delivery is at-least-once; each says what a redelivery does.

Each job runs one or more short transactions on its worker thread's database (``_run``) and passes only ids and
JSON scalars.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import Task, shared_task
from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.billing.aggregates import recent_hours, refresh_aggregates
from switchyard.platform.billing.budgets import expire_reservations
from switchyard.platform.billing.invoices import finalize_due
from switchyard.platform.billing.ledger import RATABLE, RatingResult, rate_events
from switchyard.platform.billing.tx import own_transaction
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.jobs import enqueue
from switchyard.platform.models import UsageEvent, utc_now
from switchyard.platform.settings import Settings, load_settings

__all__ = ["aggregate_task", "finalize_invoices_task", "rate_events_task", "sweep_task"]

log = logging.getLogger(__name__)
T = TypeVar("T")

BATCH = 500
SWEEP_AGE = timedelta(seconds=30)
"""The sweeper leaves events younger than this to the ``billing.rate_events`` sent right after their commit."""

REFRESH_WINDOW = timedelta(hours=2)
"""The periodic ``billing.aggregate`` recomputes buckets of events recorded this recently (catching lost jobs)."""


def _settings(task: Task[Any, Any]) -> Settings:
    """The settings of the Celery app running ``task`` (``create_celery`` puts them on its conf)."""
    settings = getattr(task.app.conf, "switchyard_settings", None)
    return settings if isinstance(settings, Settings) else load_settings()


_local = threading.local()


def _run(task: Task[Any, Any], job: Callable[[Database], Awaitable[T]]) -> T:
    """``job`` on this worker thread's billing loop, with its database: both made by the thread's first billing
    job and kept, so that a job takes a pooled connection instead of opening one (on PostgreSQL, a server
    process forked per job: every usage commit sends two jobs)."""
    url = _settings(task).database_url
    kept: tuple[asyncio.AbstractEventLoop, Database] | None = getattr(_local, "kept", None)
    if kept is None or kept[1].url != url:
        if kept is not None:
            kept[0].run_until_complete(kept[1].dispose())
            kept[0].close()
        kept = (asyncio.new_event_loop(), Database(url))
        _local.kept = kept
    loop, database = kept
    return loop.run_until_complete(job(database))


@shared_task(name="billing.rate_events", bind=True)
def rate_events_task(self: Task[Any, Any], event_ids: list[str] | None = None) -> dict[str, int]:
    """Rate the given events (or the oldest pending ones), then send ``billing.aggregate`` for the hours rated.
    Redelivery: events already rated are skipped by the conditional update, so nothing is priced twice."""

    async def job(database: Database) -> RatingResult:
        async with own_transaction(database, UNSCOPED) as session:
            return await rate_events(session, event_ids=event_ids, limit=BATCH)

    result = _run(self, job)
    by_tenant: dict[str, list[str]] = {}
    for tenant_id, hour in sorted(result.hours):
        by_tenant.setdefault(tenant_id, []).append(hour.isoformat())
    for tenant_id, hours in by_tenant.items():  # sent after the rating committed
        enqueue(self.app, "billing.aggregate", tenant_id, hours)
    return {"rated": result.rated, "unpriced": result.unpriced}


@shared_task(name="billing.aggregate", bind=True)
def aggregate_task(
    self: Task[Any, Any], tenant_id: str | None = None, hours: list[str] | None = None
) -> dict[str, int]:
    """Recompute usage roll-ups: the given hour buckets (and their days) of a tenant, or, with no arguments,
    every bucket that received events in the last ``REFRESH_WINDOW``. Redelivery: buckets are recomputed
    from the ledger, so the rows come out the same."""

    async def job(database: Database) -> dict[str, int]:
        if tenant_id is not None:
            wanted = {tenant_id: [datetime.fromisoformat(hour) for hour in hours or []]}
        else:
            async with database.unit_of_work(UNSCOPED) as session:
                wanted = await recent_hours(session, since=utc_now() - REFRESH_WINDOW)
        written = 0
        for tenant, tenant_hours in sorted(wanted.items()):
            async with own_transaction(database, UNSCOPED) as session:
                written += await refresh_aggregates(session, tenant_id=tenant, hours=tenant_hours)
        return {"tenants": len(wanted), "rows": written}

    return _run(self, job)


@shared_task(name="billing.sweep", bind=True)
def sweep_task(self: Task[Any, Any]) -> dict[str, int]:
    """Re-enqueue ratable events older than ``SWEEP_AGE`` in batches and expire stale reservations.
    Redelivery: at worst the same batch is enqueued twice, and rating it twice is a no-op."""

    async def job(database: Database) -> tuple[list[list[str]], int]:
        async with database.unit_of_work(UNSCOPED) as session:
            ids = list(
                (
                    await session.execute(
                        select(col(UsageEvent.id))
                        .where(col(UsageEvent.status).in_(RATABLE), col(UsageEvent.recorded_at) < utc_now() - SWEEP_AGE)
                        .order_by(col(UsageEvent.id))
                        .limit(BATCH * 20)
                    )
                ).scalars()
            )
        expired = await expire_reservations(database)
        return [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)], expired

    batches, expired = _run(self, job)
    for batch in batches:
        enqueue(self.app, "billing.rate_events", batch)
    return {"batches": len(batches), "events": sum(map(len, batches)), "expired_reservations": expired}


@shared_task(name="billing.finalize_invoices", bind=True)
def finalize_invoices_task(self: Task[Any, Any]) -> dict[str, Any]:
    """Finalize every draft past its month's grace period. Redelivery: finalized invoices are skipped (the
    status flip is conditional), so each is finalized exactly once."""
    finalized = _run(self, lambda database: finalize_due(database))
    if finalized:
        log.info("finalized %d invoices", len(finalized))
    return {"finalized": finalized}
