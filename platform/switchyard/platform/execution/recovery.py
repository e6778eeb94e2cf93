"""Finding the jobs a process should be driving and is not, the same way for runs and responses.

Three ways a job is left behind: its process died (its lease passed with a holder), it was put aside for admission
and the message meant to bring it back was lost (no holder, its time passed), or the message that should have
started it was lost (never leased, older than a grace period). The recovery jobs of each front end
(``runs/tasks.py``, ``responses/tasks.py``) send what these find to the workers; a lease lets one process in, so
finding a job twice is harmless.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select
from sqlmodel import col

from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.models import utc_now

__all__ = ["LeftBehind", "left_behind"]

LeftBehind = tuple[str, str, str, dict[str, Any] | None]
"""``(tenant_id, job id, status, state)`` of a job left behind."""


def _died(table: Any, now: datetime) -> ColumnElement[bool]:
    """Its holder stopped extending the lease."""
    return and_(col(table.lease_expires_at) < now, col(table.lease_owner).is_not(None))


def _set_aside_passed(table: Any, now: datetime, grace_s: float) -> ColumnElement[bool]:
    """Put aside for admission (no holder), and its time passed ``grace_s`` ago."""
    return and_(col(table.lease_expires_at) < now - timedelta(seconds=grace_s), col(table.lease_owner).is_(None))


def _never_picked_up(table: Any, now: datetime, grace_s: float) -> ColumnElement[bool]:
    return and_(col(table.lease_expires_at).is_(None), col(table.updated_at) < now - timedelta(seconds=grace_s))


async def left_behind(
    database: Database,
    table: Any,
    *,
    active: Collection[str],
    died: bool = True,
    set_aside_grace_s: float | None = None,
    never_picked_up_grace_s: float | None = None,
    limit: int = 1000,
) -> list[LeftBehind]:
    """Jobs of ``table`` with a status in ``active`` left behind in the ways asked for: their process ``died``;
    put aside and not taken ``set_aside_grace_s`` after their time; never leased ``never_picked_up_grace_s``
    after their last change. Oldest first, at most ``limit``."""
    now = utc_now()
    ways = [_died(table, now)] if died else []
    if set_aside_grace_s is not None:
        ways.append(_set_aside_passed(table, now, set_aside_grace_s))
    if never_picked_up_grace_s is not None:
        ways.append(_never_picked_up(table, now, never_picked_up_grace_s))
    if not ways:
        return []
    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            select(col(table.tenant_id), col(table.id), col(table.status), col(table.state))
            .where(col(table.status).in_(tuple(active)), or_(*ways))
            .order_by(col(table.id))
            .limit(limit)
        )
        return [(tenant_id, job_id, status, state) for tenant_id, job_id, status, state in rows.all()]
