"""Fair turns between tenants: which background job a free worker slot takes next.

A ``runs.execute`` or ``responses.execute`` message is a unit of worker capacity rather than an order to run
one job: the worker taking it serves the tenant it served least recently (``tenant_turns.served_at``, oldest
first, a tenant never served before all), that tenant's oldest job that can go on now. So a tenant's backlog
delays another tenant's job by at most one of its jobs per worker slot, whatever the queue's order: with one
slot and tenant X's ten jobs queued ahead of tenant Y's one, Y's starts after X's first.

Every job that can go on keeps a message of its own: a message spent on another job sends its own job's again
(``background.tasks.serve_in_turn``), and a job put aside is sent for when it may go on. A job can go on now
when it is active, no process holds its lease and it is not put aside (``lease_expires_at`` null or passed),
and, for a run, no earlier run of its thread is active; background responses, and foreground ones whose process
died (their lease passed). The lease still
decides: two workers choosing the same job race for it, and the loser takes the next one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from switchyard.platform.billing.sql import dialect_name
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import ResponseRecord, Run, TenantTurn, utc_now

__all__ = ["RESPONSE", "RUN", "Job", "can_go_on", "fair_order", "take_turn"]

RUN = "run"
RESPONSE = "response"
_ACTIVE = ("queued", "in_progress")
_NEVER = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Job:
    """A background job: a run or a response (``kind``) of a tenant."""

    kind: str
    tenant_id: str
    id: str


async def take_turn(session: AsyncSession, scope: TenantScope) -> None:
    """Record that a worker takes one of the tenant's jobs now (in the transaction that takes its lease)."""
    module: Any = postgresql if dialect_name(session) == "postgresql" else sqlite
    statement = module.insert(TenantTurn).values(tenant_id=scope.tenant_id, served_at=utc_now())
    await session.execute(
        statement.on_conflict_do_update(index_elements=["tenant_id"], set_={"served_at": statement.excluded.served_at})
    )


def _free(table: Any, now: datetime) -> ColumnElement[bool]:
    return or_(col(table.lease_expires_at).is_(None), col(table.lease_expires_at) < now)


def _run_can_go_on(now: datetime) -> ColumnElement[bool]:
    earlier = aliased(Run)
    ahead = exists().where(
        col(earlier.tenant_id) == col(Run.tenant_id),
        col(earlier.thread_id) == col(Run.thread_id),
        col(earlier.id) < col(Run.id),
        col(earlier.status).in_((*_ACTIVE, "requires_action")),
    )
    return and_(col(Run.status).in_(_ACTIVE), _free(Run, now), ~ahead)


def _response_can_go_on(now: datetime) -> ColumnElement[bool]:
    # a foreground response with no lease yet is its API process's, about to be taken there
    ours = or_(col(ResponseRecord.background), col(ResponseRecord.lease_expires_at).is_not(None))
    return and_(col(ResponseRecord.status).in_(_ACTIVE), _free(ResponseRecord, now), ours)


async def can_go_on(database: Database, job: Job) -> bool:
    """Whether ``job`` is one a free slot may take now (else its message serves it alone: it is finished,
    waiting for the client, held, put aside, or behind another run of its thread)."""
    now = utc_now()
    table: Any = Run if job.kind == RUN else ResponseRecord
    condition = _run_can_go_on(now) if job.kind == RUN else _response_can_go_on(now)
    async with database.unit_of_work(UNSCOPED) as session:
        found = await session.execute(
            select(col(table.id)).where(col(table.tenant_id) == job.tenant_id, col(table.id) == job.id, condition)
        )
        return found.scalar_one_or_none() is not None


async def fair_order(database: Database, *, passing: Collection[str] = (), limit: int = 8) -> list[Job]:
    """Up to ``limit`` jobs that can go on now, one per tenant, the least recently served tenant's first; each
    tenant's oldest job (ids sort by creation time). Tenants in ``passing`` are passed over (those at their share of
    this worker: ``background.shares``)."""
    now = utc_now()
    async with database.unit_of_work(UNSCOPED) as session:
        oldest: dict[str, Job] = {}
        for kind, table, condition in (
            (RUN, Run, _run_can_go_on(now)),
            (RESPONSE, ResponseRecord, _response_can_go_on(now)),
        ):
            chosen = [condition, col(table.tenant_id).not_in(list(passing))] if passing else [condition]
            rows = await session.execute(
                select(col(table.tenant_id), func.min(col(table.id))).where(*chosen).group_by(col(table.tenant_id))
            )
            for tenant_id, job_id in rows.all():
                held = oldest.get(tenant_id)
                if held is None or _created(job_id) < _created(held.id):
                    oldest[tenant_id] = Job(kind, tenant_id, job_id)
        if not oldest:
            return []
        turns = await session.execute(
            select(col(TenantTurn.tenant_id), col(TenantTurn.served_at)).where(
                col(TenantTurn.tenant_id).in_(list(oldest))
            )
        )
        served = dict(turns.all())
    ordered = sorted(oldest.values(), key=lambda job: (served.get(job.tenant_id, _NEVER), _created(job.id)))
    return ordered[:limit]


def _created(job_id: str) -> str:
    """The time-ordered part of an id (``run_01j…``, ``resp_01j…``): ids of both kinds compare by it."""
    return job_id.split("_", 1)[1]
