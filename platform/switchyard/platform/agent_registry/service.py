"""Agents and their versions: create, read, change (a new version), delete (hidden, versions kept)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec
from switchyard.agents.tools.secrets import kept_secrets, seal_tool_secrets
from switchyard.platform.agent_registry.schemas import (
    AgentCreate,
    AgentDeleted,
    AgentPublic,
    AgentUpdate,
    AgentVersionPublic,
)
from switchyard.platform.agent_registry.team import check_team
from switchyard.platform.agent_registry.versions import agent_row, get_version, latest_versions
from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import Agent, AgentVersion, utc_now

__all__ = [
    "ModelCheck",
    "add_version",
    "create_agent",
    "delete_agent",
    "get_agent",
    "get_version",
    "list_agents",
    "list_versions",
    "sealed",
    "update_agent",
]

ModelCheck = Callable[[str], Any]
"""Raises ``NotFound`` (``model_not_found``) when the tenant may not use the model."""


def _check_output_cap(spec: AgentSpec, max_output_tokens: int) -> None:
    """An agent may not ask more output tokens per call than any request may (``SWITCHYARD_MAX_OUTPUT_TOKENS``)."""
    asked = spec.model_params.max_tokens
    if asked is not None and asked > max_output_tokens:
        raise InvalidRequest(
            f"model_params.max_tokens is {asked}; at most {max_output_tokens} is allowed",
            param="model_params.max_tokens",
            code="invalid_value",
        )


def sealed(spec: AgentSpec, current: AgentSpec | None = None) -> AgentSpec:
    """``spec`` with its MCP headers sealed (those sent back as ``<redacted>`` keep ``current``'s values)."""
    try:
        return seal_tool_secrets(spec, kept=kept_secrets(current) if current is not None else None)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="tools", code="invalid_value") from None


def add_version(session: AsyncSession, scope: TenantScope, agent: Agent, spec: AgentSpec) -> AgentVersion:
    row = AgentVersion(
        id=new_id("agv"),
        tenant_id=scope.tenant_id,
        agent_id=agent.id,
        version=agent.latest_version,
        definition=spec.model_dump(mode="json"),
    )
    session.add(row)
    return row


async def create_agent(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    data: AgentCreate,
    check_model: ModelCheck,
    max_output_tokens: int,
) -> AgentPublic:
    check_model(data.model)
    spec = sealed(AgentSpec.model_validate(data.model_dump()))
    _check_output_cap(spec, max_output_tokens)
    await check_team(session, scope, spec)
    agent = Agent(id=new_id("agent"), tenant_id=scope.tenant_id, name=spec.name, latest_version=1)
    session.add(agent)
    version = add_version(session, scope, agent, spec)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="agent.create",
        target_type="agent",
        target_id=agent.id,
        details={"version": 1, "model": spec.model},
    )
    await session.flush()
    return AgentPublic.of(agent, version)


async def get_agent(session: AsyncSession, *, scope: TenantScope, agent_id: str) -> AgentPublic:
    agent, version = await get_version(session, scope=scope, agent_id=agent_id, kind="agent")
    return AgentPublic.of(agent, version)


async def list_agents(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[AgentPublic]:
    page = await latest_versions(session, scope=scope, params=params, kind="agent")
    data = [AgentPublic.of(agent, version) for agent, version in page.data]
    return Page[AgentPublic](data=data, first_id=page.first_id, last_id=page.last_id, has_more=page.has_more)


async def update_agent(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    agent_id: str,
    data: AgentUpdate,
    check_model: ModelCheck,
    max_output_tokens: int,
) -> AgentPublic:
    """Apply the fields present in ``data``; a new version only when the definition actually changes."""
    agent, current = await get_version(session, scope=scope, agent_id=agent_id, kind="agent")
    definition = dict(current.definition)
    for field in data.model_fields_set:
        value = getattr(data, field)
        if value is None:
            if field in ("name", "model"):
                raise InvalidRequest(f"{field} cannot be null", param=field, code="invalid_value")
            definition.pop(field, None)
        else:
            definition[field] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
            if field in ("tools", "handoffs"):
                definition[field] = [t.model_dump(mode="json") for t in value]
    try:
        spec = AgentSpec.model_validate(definition)
    except ValueError as exc:
        raise InvalidRequest(f"invalid agent definition: {exc}", code="invalid_value") from None
    current_spec = AgentSpec.model_validate(current.definition)
    spec = sealed(spec, current_spec)
    if spec.model_dump(mode="json") == current_spec.model_dump(mode="json"):
        return AgentPublic.of(agent, current)
    if "model" in data.model_fields_set:
        check_model(spec.model)
    _check_output_cap(spec, max_output_tokens)
    if "handoffs" in data.model_fields_set:
        await check_team(session, scope, spec)
    agent.latest_version += 1
    agent.name = spec.name
    agent.updated_at = utc_now()
    version = add_version(session, scope, agent, spec)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="agent.update",
        target_type="agent",
        target_id=agent.id,
        details={"version": agent.latest_version, "fields": sorted(data.model_fields_set)},
    )
    await session.flush()
    return AgentPublic.of(agent, version)


async def delete_agent(session: AsyncSession, *, scope: TenantScope, actor: Actor, agent_id: str) -> AgentDeleted:
    agent = await agent_row(session, scope, agent_id, "agent")
    agent.deleted_at = utc_now()
    record(
        session, tenant_id=scope.tenant_id, actor=actor, action="agent.delete", target_type="agent", target_id=agent_id
    )
    await session.flush()
    return AgentDeleted(id=agent_id)


async def list_versions(
    session: AsyncSession, *, scope: TenantScope, agent_id: str, params: CursorParams
) -> Page[AgentVersionPublic]:
    await agent_row(session, scope, agent_id, "agent")
    statement = select(AgentVersion).where(
        col(AgentVersion.tenant_id) == scope.tenant_id, col(AgentVersion.agent_id) == agent_id
    )
    return await paginate(session, statement, col(AgentVersion.id), params, AgentVersionPublic.of)
