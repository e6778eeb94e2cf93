"""Reading an agent and its versions (what runs, responses and handoffs start from)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import Agent, AgentVersion

__all__ = ["agent_row", "get_version", "latest_versions"]


async def agent_row(session: AsyncSession, scope: TenantScope, agent_id: str, kind: str | None = None) -> Agent:
    """The agent (or workflow) ``agent_id``, not deleted, of ``kind`` when one is named."""
    statement = select(Agent).where(col(Agent.tenant_id) == scope.tenant_id, col(Agent.id) == agent_id)
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None or (kind is not None and row.kind != kind):
        raise NotFound(f"no {kind or 'agent'} {agent_id!r}", param=f"{kind or 'agent'}_id")
    return row


async def get_version(
    session: AsyncSession, *, scope: TenantScope, agent_id: str, version: int | None = None, kind: str | None = None
) -> tuple[Agent, AgentVersion]:
    """The agent (or workflow) and one of its versions (the latest when ``version`` is ``None``)."""
    agent = await agent_row(session, scope, agent_id, kind)
    wanted = agent.latest_version if version is None else version
    statement = select(AgentVersion).where(
        col(AgentVersion.tenant_id) == scope.tenant_id,
        col(AgentVersion.agent_id) == agent_id,
        col(AgentVersion.version) == wanted,
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"agent {agent_id!r} has no version {wanted}", param="agent_version")
    return agent, row


async def latest_versions(
    session: AsyncSession, *, scope: TenantScope, params: CursorParams, kind: str
) -> Page[tuple[Agent, AgentVersion]]:
    """A page of the tenant's agents of ``kind`` (not deleted), each with its latest version."""
    statement = select(Agent).where(
        col(Agent.tenant_id) == scope.tenant_id, col(Agent.deleted_at).is_(None), col(Agent.kind) == kind
    )
    page = await paginate(session, statement, col(Agent.id), params, lambda row: row)
    ids = [agent.id for agent in page.data]
    versions = select(AgentVersion).where(
        col(AgentVersion.tenant_id) == scope.tenant_id, col(AgentVersion.agent_id).in_(ids)
    )
    by_key = {(v.agent_id, v.version): v for v in (await session.execute(versions)).scalars()} if ids else {}
    data = [(agent, by_key[(agent.id, agent.latest_version)]) for agent in page.data]
    # (rows of the ORM, not validated again)
    return Page[tuple[Agent, AgentVersion]].model_construct(
        data=data, first_id=page.first_id, last_id=page.last_id, has_more=page.has_more
    )
