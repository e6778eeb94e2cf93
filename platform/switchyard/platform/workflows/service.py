"""Workflows: create, read, change (a new version), delete (hidden, versions kept). A workflow is stored as an agent
of kind ``workflow`` whose versions' specs hold the graph, so runs, responses, budgets and usage take it as they
take an agent; its spec's model is its first agent's (the runs' records name it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec
from switchyard.agents.spec import ToolSpec
from switchyard.agents.workflows import WorkflowSpec
from switchyard.platform.agent_registry.service import add_version, sealed
from switchyard.platform.agent_registry.team import check_team, named_version
from switchyard.platform.agent_registry.versions import agent_row, get_version, latest_versions
from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import Agent, AgentVersion, utc_now
from switchyard.platform.workflows.export import agents_sdk_module
from switchyard.platform.workflows.schemas import (
    WorkflowCreate,
    WorkflowDeleted,
    WorkflowPublic,
    WorkflowUpdate,
    WorkflowVersionPublic,
)

__all__ = [
    "create_workflow",
    "delete_workflow",
    "export_workflow",
    "get_workflow",
    "list_versions",
    "list_workflows",
    "update_workflow",
]

KIND = "workflow"


async def _as_agent(
    session: AsyncSession,
    scope: TenantScope,
    graph: WorkflowSpec,
    tools: Sequence[ToolSpec],
    current: AgentSpec | None = None,
) -> AgentSpec:
    """The agent spec a workflow runs as (its MCP headers sealed; those sent back as ``<redacted>`` keep
    ``current``'s); 400 when a node names a tool the workflow does not have, 404 an agent the tenant does not have."""
    models = [
        (await named_version(session, scope, agent_id, version, f"nodes.{node}.agent_id")).model
        for node, agent_id, version in graph.agent_refs()
    ]
    if not models:
        raise InvalidRequest("a workflow needs at least one agent node", param="nodes", code="invalid_value")
    try:
        spec = AgentSpec(name=graph.name, model=models[0], tools=list(tools), workflow=graph, metadata=graph.metadata)
    except ValueError as exc:
        raise InvalidRequest(f"invalid workflow: {exc}", code="invalid_value") from None
    spec = sealed(spec, current)
    await check_team(session, scope, spec)
    return spec


async def create_workflow(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, data: WorkflowCreate
) -> WorkflowPublic:
    spec = await _as_agent(session, scope, data.graph(), data.tools)
    row = Agent(id=new_id(KIND), tenant_id=scope.tenant_id, name=spec.name, kind=KIND, latest_version=1)
    session.add(row)
    version = add_version(session, scope, row, spec)
    details = {"version": 1, "nodes": len(data.nodes)}
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="workflow.create",
        target_type=KIND,
        target_id=row.id,
        details=details,
    )
    await session.flush()
    return WorkflowPublic.of(row, version)


async def get_workflow(session: AsyncSession, *, scope: TenantScope, workflow_id: str) -> WorkflowPublic:
    row, version = await get_version(session, scope=scope, agent_id=workflow_id, kind=KIND)
    return WorkflowPublic.of(row, version)


async def list_workflows(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[WorkflowPublic]:
    page = await latest_versions(session, scope=scope, params=params, kind=KIND)
    data = [WorkflowPublic.of(row, version) for row, version in page.data]
    return Page[WorkflowPublic](data=data, first_id=page.first_id, last_id=page.last_id, has_more=page.has_more)


async def update_workflow(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, workflow_id: str, data: WorkflowUpdate
) -> WorkflowPublic:
    """Apply the fields present in ``data``; a new version only when the graph actually changes."""
    row, current = await get_version(session, scope=scope, agent_id=workflow_id, kind=KIND)
    current_spec = AgentSpec.model_validate(current.definition)
    assert current_spec.workflow is not None
    merged: dict[str, Any] = current_spec.workflow.model_dump(mode="json", by_alias=True)
    for field in data.model_fields_set - {"tools"}:
        value = getattr(data, field)
        if value is not None:
            merged[field] = _plain(value)
    try:
        changed = WorkflowSpec.model_validate(merged)
    except ValueError as exc:
        raise InvalidRequest(f"invalid workflow: {exc}", code="invalid_value") from None
    tools = current_spec.tools if data.tools is None else data.tools
    spec = await _as_agent(session, scope, changed, tools, current_spec)
    if spec.model_dump(mode="json") == current_spec.model_dump(mode="json"):
        return WorkflowPublic.of(row, current)
    row.latest_version += 1
    row.name = spec.name
    row.updated_at = utc_now()
    version = add_version(session, scope, row, spec)
    details = {"version": row.latest_version, "fields": sorted(data.model_fields_set)}
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="workflow.update",
        target_type=KIND,
        target_id=row.id,
        details=details,
    )
    await session.flush()
    return WorkflowPublic.of(row, version)


def _plain(value: Any) -> Any:
    """A field's value as JSON (nodes and state variables are models)."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value


async def delete_workflow(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, workflow_id: str
) -> WorkflowDeleted:
    row = await agent_row(session, scope, workflow_id, KIND)
    row.deleted_at = utc_now()
    record(
        session, tenant_id=scope.tenant_id, actor=actor, action="workflow.delete", target_type=KIND, target_id=row.id
    )
    await session.flush()
    return WorkflowDeleted(id=workflow_id)


async def list_versions(
    session: AsyncSession, *, scope: TenantScope, workflow_id: str, params: CursorParams
) -> Page[WorkflowVersionPublic]:
    await agent_row(session, scope, workflow_id, KIND)
    statement = select(AgentVersion).where(
        col(AgentVersion.tenant_id) == scope.tenant_id, col(AgentVersion.agent_id) == workflow_id
    )
    return await paginate(session, statement, col(AgentVersion.id), params, WorkflowVersionPublic.of)


async def export_workflow(session: AsyncSession, *, scope: TenantScope, workflow_id: str) -> str:
    """The workflow's latest version as a module for openai-agents (``export.py``), each agent node fixed at the
    version it names or at the agent's latest now."""
    row, version = await get_version(session, scope=scope, agent_id=workflow_id, kind=KIND)
    spec = AgentSpec.model_validate(version.definition)
    assert spec.workflow is not None
    agents: dict[str, tuple[int, AgentSpec]] = {}
    for node, agent_id, wanted in spec.workflow.agent_refs():
        _, agent_version = await get_version(session, scope=scope, agent_id=agent_id, version=wanted)
        agents[node] = (agent_version.version, AgentSpec.model_validate(agent_version.definition))
    return agents_sdk_module(row.id, version.version, spec, agents)
