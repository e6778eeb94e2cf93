"""Reads the console shows that no API route offers as such (the tenant's latest runs across threads, the
responses made through ``/v1/responses`` (agent runs among them, with ``prompt.id``), and the chat completions, which
and the text completions of ``/v1/completions``, which leave only their usage events behind)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import Agent, ResponseRecord, Run, UsageEvent

__all__ = [
    "EXECUTION_KINDS",
    "RUN_STATUSES",
    "ChatCompletionRecord",
    "RecentRun",
    "agent_names",
    "chat_completion",
    "count_runs_since",
    "find_execution",
    "list_runs",
    "recent_runs",
    "thread_of_run",
]

MODEL_CALL_KINDS = {"chatcmpl-": "chat", "cmpl-": "completion"}
"""The kind of a model call made through the gateway by the prefix of its id, which keys its usage event (a text
completion of several choices has one event per choice, ``cmpl-…-0``, ``cmpl-…-1``)."""


@dataclass(frozen=True, slots=True)
class RecentRun:
    """An execution: a run of a thread (``kind`` ``run``), a stored response (``kind`` ``response``; its
    ``thread_id`` is its conversation's id, or empty; its agent empty unless made with ``prompt.id``) or a chat
    completion or a text completion (``kind`` ``chat`` or ``completion``: no agent, no thread)."""

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
    model: str = ""
    agent_kind: str = "agent"  # or workflow


async def recent_runs(session: AsyncSession, *, scope: TenantScope, limit: int = 10) -> list[RecentRun]:
    statement = (
        select(Run, col(Agent.name))
        .join(Agent, col(Agent.id) == col(Run.agent_id))
        .where(col(Run.tenant_id) == scope.tenant_id, col(Agent.tenant_id) == scope.tenant_id)
        .order_by(col(Run.created_at).desc(), col(Run.id).desc())
        .limit(limit)
    )
    return [_recent(run, name) for run, name in (await session.execute(statement)).all()]


def _recent(run: Run, name: str, agent_kind: str = "agent") -> RecentRun:
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
        agent_kind=agent_kind,
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


EXECUTION_KINDS = {
    "agents": "agent and workflow runs",
    "responses": "responses (/v1/responses)",
    "chat": "chat and text completions",
    "all": "everything",
}
"""What the runs list shows, by the value of its ``kind`` filter: ``agents`` (the default) are the runs of threads
and the responses made with ``prompt.id``."""


async def list_runs(
    session: AsyncSession,
    *,
    scope: TenantScope,
    kind: str = "agents",
    agent_id: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[RecentRun]:
    """The tenant's executions of ``kind`` (see ``EXECUTION_KINDS``), newest first, filtered by agent, status and
    start time. A chat or text completion has no agent and is recorded only once it completed."""
    found: list[RecentRun] = []
    if kind in ("agents", "all"):
        found += await _thread_runs(session, scope=scope, agent_id=agent_id, status=status, since=since, limit=limit)
    if kind in ("agents", "responses", "all"):
        found += await _responses(
            session, scope=scope, agents_only=kind == "agents", agent_id=agent_id, status=status, since=since,
            limit=limit,
        )  # fmt: skip
    if kind in ("chat", "all") and not agent_id and status in (None, "completed"):
        found += await _model_calls(session, scope=scope, since=since, limit=limit)
    return sorted(found, key=lambda r: (r.created_at, r.id), reverse=True)[:limit]


async def _thread_runs(
    session: AsyncSession,
    *,
    scope: TenantScope,
    agent_id: str | None,
    status: str | None,
    since: datetime | None,
    limit: int,
) -> list[RecentRun]:
    statement = (
        select(Run, col(Agent.name), col(Agent.kind))
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
    return [_recent(run, name, agent_kind) for run, name, agent_kind in (await session.execute(statement)).all()]


async def _responses(
    session: AsyncSession,
    *,
    scope: TenantScope,
    agents_only: bool,
    agent_id: str | None,
    status: str | None,
    since: datetime | None,
    limit: int,
) -> list[RecentRun]:
    """The tenant's stored responses (``agents_only``: those that ran an agent, ``prompt.id``), newest first,
    filtered as runs are."""
    statement = (
        select(ResponseRecord, col(Agent.name), col(Agent.kind))
        .join(
            Agent,
            (col(Agent.id) == col(ResponseRecord.agent_id)) & (col(Agent.tenant_id) == scope.tenant_id),
            isouter=not agents_only,
        )
        .where(
            col(ResponseRecord.tenant_id) == scope.tenant_id,
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
            agent_name=name or "",
            agent_version=row.agent_version or 0,
            status=row.status,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            chip_us=row.chip_us,
            created_at=row.created_at,
            kind="response",
            model=row.model,
            agent_kind=agent_kind or "agent",
        )
        for row, name, agent_kind in (await session.execute(statement)).all()
    ]


def _model_call_kind(event_id: str) -> str | None:
    return next((kind for prefix, kind in MODEL_CALL_KINDS.items() if event_id.startswith(prefix)), None)


async def _model_calls(
    session: AsyncSession, *, scope: TenantScope, since: datetime | None, limit: int
) -> list[RecentRun]:
    statement = select(UsageEvent).where(
        col(UsageEvent.tenant_id) == scope.tenant_id,
        or_(*(col(UsageEvent.event_id).startswith(prefix) for prefix in MODEL_CALL_KINDS)),
    )
    if since is not None:
        statement = statement.where(col(UsageEvent.occurred_at) >= since)
    statement = statement.order_by(col(UsageEvent.occurred_at).desc(), col(UsageEvent.id).desc()).limit(limit)
    return [
        RecentRun(
            id=row.event_id,
            thread_id="",
            agent_id="",
            agent_name="",
            agent_version=0,
            status="completed",
            input_tokens=row.prompt_tokens,
            output_tokens=row.completion_tokens,
            chip_us=row.chip_us,
            created_at=row.occurred_at,
            kind=_model_call_kind(row.event_id) or "chat",
            model=row.model,
        )
        for row in (await session.execute(statement)).scalars().all()
    ]


@dataclass(frozen=True, slots=True)
class ChatCompletionRecord:
    """What the platform keeps of a chat or text completion (``kind`` ``chat`` or ``completion``): its usage event
    (never its prompt or its answer)."""

    id: str
    kind: str
    model: str
    instance_type: str
    api_key_id: str | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    chip_us: int
    cache_saved_chip_us: int
    occurred_at: datetime


async def chat_completion(
    session: AsyncSession, *, scope: TenantScope, completion_id: str
) -> ChatCompletionRecord | None:
    """The tenant's chat completion (``chatcmpl-…``) or text completion choice (``cmpl-…``) ``completion_id``, or
    ``None``."""
    kind = _model_call_kind(completion_id)
    if kind is None:
        return None
    statement = select(UsageEvent).where(
        col(UsageEvent.tenant_id) == scope.tenant_id, col(UsageEvent.event_id) == completion_id
    )
    row = (await session.execute(statement)).scalars().first()
    if row is None:
        return None
    return ChatCompletionRecord(
        id=row.event_id,
        kind=kind,
        model=row.model,
        instance_type=row.instance_type,
        api_key_id=row.api_key_id,
        prompt_tokens=row.prompt_tokens,
        cached_tokens=row.cached_tokens,
        completion_tokens=row.completion_tokens,
        chip_us=row.chip_us,
        cache_saved_chip_us=row.cache_saved_chip_us,
        occurred_at=row.occurred_at,
    )


async def find_execution(session: AsyncSession, *, scope: TenantScope, execution_id: str) -> str | None:
    """Whether the tenant has a run, a stored response or a chat or text completion of this id: its kind (``run``,
    ``response`` or ``chat``), else ``None``."""
    if await thread_of_run(session, scope=scope, run_id=execution_id) is not None:
        return "run"
    response = select(col(ResponseRecord.id)).where(
        col(ResponseRecord.tenant_id) == scope.tenant_id,
        col(ResponseRecord.id) == execution_id,
        col(ResponseRecord.stored).is_(True),
    )
    if (await session.execute(response)).scalar_one_or_none() is not None:
        return "response"
    if await chat_completion(session, scope=scope, completion_id=execution_id) is not None:
        return "chat"
    return None


async def agent_names(session: AsyncSession, *, scope: TenantScope, agent_ids: set[str]) -> dict[str, tuple[str, str]]:
    """The name and kind (``agent`` or ``workflow``) of each of the tenant's agents in ``agent_ids`` (deleted ones
    too: their runs still name them)."""
    if not agent_ids:
        return {}
    statement = select(col(Agent.id), col(Agent.name), col(Agent.kind)).where(
        col(Agent.tenant_id) == scope.tenant_id, col(Agent.id).in_(agent_ids)
    )
    return {agent_id: (name, kind) for agent_id, name, kind in (await session.execute(statement)).all()}


async def thread_of_run(session: AsyncSession, *, scope: TenantScope, run_id: str) -> str | None:
    statement = select(col(Run.thread_id)).where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id)
    return (await session.execute(statement)).scalar_one_or_none()
