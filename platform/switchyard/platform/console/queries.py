"""Reads the console shows that no API route offers as such (the tenant's latest runs across threads, and the
agent runs made through ``/v1/responses`` with ``prompt.id``, which are responses, not runs, in the database)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import Agent, ResponseRecord, Run

__all__ = ["RUN_STATUSES", "RecentRun", "count_runs_since", "list_runs", "recent_runs", "thread_of_run"]


@dataclass(frozen=True, slots=True)
class RecentRun:
    """An agent's run: a run of a thread (``kind`` ``run``) or a stored response made with ``prompt.id``
    (``kind`` ``response``; its ``thread_id`` is its conversation's id, or empty)."""

    id: str
    thread_id: str
    agent_id: str
    agent_name: str
    agent_version: int
    status: str
    input_tokens: int
    output_tokens: int
    chip_us: int
    created_at: datetime
    kind: str = "run"


async def recent_runs(session: AsyncSession, *, scope: TenantScope, limit: int = 10) -> list[RecentRun]:
    statement = (
        select(Run, col(Agent.name))
        .join(Agent, col(Agent.id) == col(Run.agent_id))
        .where(col(Run.tenant_id) == scope.tenant_id, col(Agent.tenant_id) == scope.tenant_id)
        .order_by(col(Run.created_at).desc(), col(Run.id).desc())
        .limit(limit)
    )
    return [_recent(run, name) for run, name in (await session.execute(statement)).all()]


def _recent(run: Run, name: str) -> RecentRun:
    return RecentRun(
        id=run.id,
        thread_id=run.thread_id,
        agent_id=run.agent_id,
        agent_name=name,
        agent_version=run.agent_version,
        status=run.status,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        chip_us=run.chip_us,
        created_at=run.created_at,
    )


async def count_runs_since(session: AsyncSession, *, scope: TenantScope, since: datetime) -> int:
    statement = select(func.count()).where(col(Run.tenant_id) == scope.tenant_id, col(Run.created_at) >= since)
    return int((await session.execute(statement)).scalar_one())


RUN_STATUSES = (
    "queued",
    "in_progress",
    "requires_action",
    "cancelling",
    "cancelled",
    "failed",
    "completed",
    "incomplete",
    "expired",
)


async def list_runs(
    session: AsyncSession,
    *,
    scope: TenantScope,
    agent_id: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[RecentRun]:
    """The tenant's agent runs across threads, newest first, filtered by agent, status and start time: runs of
    threads and stored responses made with ``prompt.id`` together."""
    statement = (
        select(Run, col(Agent.name))
        .join(Agent, col(Agent.id) == col(Run.agent_id))
        .where(col(Run.tenant_id) == scope.tenant_id, col(Agent.tenant_id) == scope.tenant_id)
    )
    if agent_id:
        statement = statement.where(col(Run.agent_id) == agent_id)
    if status:
        statement = statement.where(col(Run.status) == status)
    if since is not None:
        statement = statement.where(col(Run.created_at) >= since)
    statement = statement.order_by(col(Run.created_at).desc(), col(Run.id).desc()).limit(limit)
    runs = [_recent(run, name) for run, name in (await session.execute(statement)).all()]
    responses = await _agent_responses(session, scope=scope, agent_id=agent_id, status=status, since=since, limit=limit)
    return sorted([*runs, *responses], key=lambda r: (r.created_at, r.id), reverse=True)[:limit]


async def _agent_responses(
    session: AsyncSession,
    *,
    scope: TenantScope,
    agent_id: str | None,
    status: str | None,
    since: datetime | None,
    limit: int,
) -> list[RecentRun]:
    """The tenant's stored responses that ran an agent (``prompt.id``), newest first, filtered as runs are."""
    statement = (
        select(ResponseRecord, col(Agent.name))
        .join(Agent, col(Agent.id) == col(ResponseRecord.agent_id))
        .where(
            col(ResponseRecord.tenant_id) == scope.tenant_id,
            col(Agent.tenant_id) == scope.tenant_id,
            col(ResponseRecord.stored).is_(True),  # an unstored response is kept for its books only, never shown
        )
    )
    if agent_id:
        statement = statement.where(col(ResponseRecord.agent_id) == agent_id)
    if status:
        statement = statement.where(col(ResponseRecord.status) == status)
    if since is not None:
        statement = statement.where(col(ResponseRecord.created_at) >= since)
    statement = statement.order_by(col(ResponseRecord.created_at).desc(), col(ResponseRecord.id).desc()).limit(limit)
    return [
        RecentRun(
            id=row.id,
            thread_id=row.conversation_id or "",
            agent_id=row.agent_id or "",
            agent_name=name,
            agent_version=row.agent_version or 0,
            status=row.status,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            chip_us=row.chip_us,
            created_at=row.created_at,
            kind="response",
        )
        for row, name in (await session.execute(statement)).all()
    ]


async def thread_of_run(session: AsyncSession, *, scope: TenantScope, run_id: str) -> str | None:
    statement = select(col(Run.thread_id)).where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id)
    return (await session.execute(statement)).scalar_one_or_none()
