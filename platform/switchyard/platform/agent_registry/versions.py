"""Reading an agent and its versions (what runs, responses and handoffs start from)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import NotFound
from switchyard.platform.models import Agent, AgentVersion

__all__ = ["agent_row", "get_version"]


async def agent_row(session: AsyncSession, scope: TenantScope, agent_id: str) -> Agent:
    statement = select(Agent).where(col(Agent.tenant_id) == scope.tenant_id, col(Agent.id) == agent_id)
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None:
        raise NotFound(f"no agent {agent_id!r}", param="agent_id")
    return row


async def get_version(
    session: AsyncSession, *, scope: TenantScope, agent_id: str, version: int | None = None
) -> tuple[Agent, AgentVersion]:
    """The agent and one of its versions (the latest when ``version`` is ``None``)."""
    agent = await agent_row(session, scope, agent_id)
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
