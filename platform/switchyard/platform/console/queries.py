"""Reads the console shows that no API route offers as such (the tenant's latest runs across threads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import Agent, Run

__all__ = ["RUN_STATUSES", "RecentRun", "count_runs_since", "list_runs", "recent_runs", "thread_of_run"]


@dataclass(frozen=True, slots=True)
class RecentRun:
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
    """The tenant's runs across threads, newest first, filtered by agent, status and start time."""
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
    return [_recent(run, name) for run, name in (await session.execute(statement)).all()]


async def thread_of_run(session: AsyncSession, *, scope: TenantScope, run_id: str) -> str | None:
    statement = select(col(Run.thread_id)).where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id)
    return (await session.execute(statement)).scalar_one_or_none()
