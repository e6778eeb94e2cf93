from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.admission import model_backend
from switchyard.platform.agent_registry import service
from switchyard.platform.agent_registry.schemas import (
    AgentCreate,
    AgentDeleted,
    AgentPublic,
    AgentUpdate,
    AgentVersionPublic,
)
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import Page

__all__ = ["AgentController", "model_check"]


def model_check(request: Request[Any, Any, Any], scope: TenantScope) -> service.ModelCheck:
    """Refuses (404 ``model_not_found``) a model the pool does not serve to this tenant, and (400
    ``model_not_supported``) an embedding model: an agent's model chats."""
    pool = request.app.state.gateway.pool
    return lambda model: model_backend(pool, model, scope.tenant_id, task="chat")


class AgentController(Controller):
    path = "/v1/agents"
    tags = ["Agents"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Create an agent", raises=[NotFound])
    async def create_agent(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        data: JSONBody[AgentCreate],
    ) -> AgentPublic:
        """Define an agent (version 1): instructions, model, tools, model parameters, limits, metadata."""
        return await service.create_agent(
            db_session,
            scope=tenant,
            actor=actor,
            data=data,
            check_model=model_check(request, tenant),
            max_output_tokens=request.app.state.settings.max_output_tokens,
        )

    @get(opt=access(Role.VIEWER), summary="List agents")
    async def list_agents(self, db_session: DbSession, tenant: CurrentTenant, page: PageParams) -> Page[AgentPublic]:
        return await service.list_agents(db_session, scope=tenant, params=page)

    @get("/{agent_id:str}", opt=access(Role.VIEWER), summary="Get an agent")
    async def get_agent(self, db_session: DbSession, tenant: CurrentTenant, agent_id: FromPath[str]) -> AgentPublic:
        return await service.get_agent(db_session, scope=tenant, agent_id=agent_id)

    @patch("/{agent_id:str}", opt=access(Role.DEVELOPER), summary="Change an agent (a new version)")
    async def update_agent(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        agent_id: FromPath[str],
        data: JSONBody[AgentUpdate],
    ) -> AgentPublic:
        """Absent fields keep their value; `null` resets a field to its default. Each change is a new version."""
        return await service.update_agent(
            db_session,
            scope=tenant,
            actor=actor,
            agent_id=agent_id,
            data=data,
            check_model=model_check(request, tenant),
            max_output_tokens=request.app.state.settings.max_output_tokens,
        )

    @delete("/{agent_id:str}", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Delete an agent")
    async def delete_agent(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, agent_id: FromPath[str]
    ) -> AgentDeleted:
        """Hide the agent; its versions stay for the runs that used them."""
        return await service.delete_agent(db_session, scope=tenant, actor=actor, agent_id=agent_id)

    @get("/{agent_id:str}/versions", opt=access(Role.VIEWER), summary="List an agent's versions")
    async def list_agent_versions(
        self, db_session: DbSession, tenant: CurrentTenant, agent_id: FromPath[str], page: PageParams
    ) -> Page[AgentVersionPublic]:
        return await service.list_versions(db_session, scope=tenant, agent_id=agent_id, params=page)
