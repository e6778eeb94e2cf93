"""Hourly and daily usage roll-ups (``usage_aggregates``), recomputed bucket by bucket from the ledger.

Recomputing whole buckets (delete, then insert the ledger's ``GROUP BY``) makes the job idempotent: running
it twice, late, or out of order leaves the same rows. Two jobs on the same tenant are serialized (an
advisory transaction lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so a job that read the ledger
earlier can never overwrite one that read it later.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.billing.periods import hour_start
from switchyard.platform.billing.sql import dialect_name
from switchyard.platform.db import new_id
from switchyard.platform.models import UsageAggregate, UsageEvent, utc_now

__all__ = ["recent_hours", "refresh_aggregates"]

_STEPS = {"1h": timedelta(hours=1), "1d": timedelta(days=1)}


async def _lock_tenant(session: AsyncSession, tenant_id: str) -> None:
    if dialect_name(session) == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"usage:{tenant_id}"})


async def refresh_aggregates(session: AsyncSession, *, tenant_id: str, hours: Iterable[datetime]) -> int:
    """Recompute the hour buckets containing ``hours`` and their days for one tenant; returns rows written.

    Run it in a transaction of its own (``tx.own_transaction``) on an unscoped session (a job).
    """
    hour_starts = sorted({hour_start(at) for at in hours})
    if not hour_starts:
        return 0
    await _lock_tenant(session, tenant_id)
    day_starts = sorted({at.replace(hour=0) for at in hour_starts})
    written = 0
    now = utc_now()
    for width, starts in (("1h", hour_starts), ("1d", day_starts)):
        for start in starts:
            await session.execute(
                delete(UsageAggregate).where(
                    col(UsageAggregate.tenant_id) == tenant_id,
                    col(UsageAggregate.bucket_width) == width,
                    col(UsageAggregate.bucket_start) == start,
                )
            )
            groups = await session.execute(
                select(
                    col(UsageEvent.api_key_id),
                    col(UsageEvent.agent_id),
                    col(UsageEvent.workflow_id),
                    col(UsageEvent.model),
                    col(UsageEvent.instance_type),
                    func.sum(col(UsageEvent.chip_us)),
                    func.sum(col(UsageEvent.prompt_tokens)),
                    func.sum(col(UsageEvent.completion_tokens)),
                    func.sum(col(UsageEvent.cached_tokens)),
                    func.sum(col(UsageEvent.cache_saved_chip_us)),
                    func.count(),
                )
                .where(
                    col(UsageEvent.tenant_id) == tenant_id,
                    col(UsageEvent.hour_start) >= start,
                    col(UsageEvent.hour_start) < start + _STEPS[width],
                )
                .group_by(
                    col(UsageEvent.api_key_id),
                    col(UsageEvent.agent_id),
                    col(UsageEvent.workflow_id),
                    col(UsageEvent.model),
                    col(UsageEvent.instance_type),
                )
            )
            for (
                key_id,
                agent_id,
                workflow_id,
                model,
                instance_type,
                chip_us,
                prompt,
                completion,
                cached,
                saved,
                count,
            ) in groups.all():
                session.add(
                    UsageAggregate(
                        id=new_id("agg"),
                        tenant_id=tenant_id,
                        bucket_width=width,
                        bucket_start=start,
                        api_key_id=key_id or "",
                        agent_id=agent_id or "",
                        workflow_id=workflow_id or "",
                        model=model,
                        instance_type=instance_type,
                        chip_us=int(chip_us),
                        prompt_tokens=int(prompt),
                        completion_tokens=int(completion),
                        cached_tokens=int(cached),
                        cache_saved_chip_us=int(saved),
                        event_count=int(count),
                        updated_at=now,
                    )
                )
                written += 1
    await session.flush()
    return written


async def recent_hours(session: AsyncSession, *, since: datetime) -> dict[str, list[datetime]]:
    """Tenant → hour buckets of the events recorded since ``since`` (what the periodic refresh recomputes)."""
    rows = await session.execute(
        select(col(UsageEvent.tenant_id), col(UsageEvent.hour_start))
        .where(col(UsageEvent.recorded_at) >= since)
        .distinct()
    )
    found: dict[str, list[datetime]] = {}
    for tenant_id, hour in rows.all():
        found.setdefault(tenant_id, []).append(hour)
    return found
