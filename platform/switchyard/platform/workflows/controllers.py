from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, Response, delete, get, patch, post
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentActor, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.http.openapi import answers
from switchyard.platform.http.pagination import Page
from switchyard.platform.workflows import service
from switchyard.platform.workflows.schemas import (
    WorkflowCreate,
    WorkflowDeleted,
    WorkflowPublic,
    WorkflowUpdate,
    WorkflowVersionPublic,
)

__all__ = ["WorkflowController"]


class WorkflowController(Controller):
    path = "/v1/workflows"
    tags = ["Workflows"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Create a workflow", raises=[InvalidRequest, NotFound])
    async def create_workflow(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, data: JSONBody[WorkflowCreate]
    ) -> WorkflowPublic:
        """Define a workflow (version 1): its nodes, typed state and start; checked whole (every edge, expression
        and agent; an end reachable from every node; every loop bounded)."""
        return await service.create_workflow(db_session, scope=tenant, actor=actor, data=data)

    @get(opt=access(Role.VIEWER), summary="List workflows")
    async def list_workflows(
        self, db_session: DbSession, tenant: CurrentTenant, page: PageParams
    ) -> Page[WorkflowPublic]:
        return await service.list_workflows(db_session, scope=tenant, params=page)

    @get("/{workflow_id:str}", opt=access(Role.VIEWER), summary="Get a workflow", raises=[NotFound])
    async def get_workflow(
        self, db_session: DbSession, tenant: CurrentTenant, workflow_id: FromPath[str]
    ) -> WorkflowPublic:
        return await service.get_workflow(db_session, scope=tenant, workflow_id=workflow_id)

    @patch(
        "/{workflow_id:str}",
        opt=access(Role.DEVELOPER),
        summary="Change a workflow (a new version)",
        raises=[InvalidRequest, NotFound],
    )
    async def update_workflow(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        workflow_id: FromPath[str],
        data: JSONBody[WorkflowUpdate],
    ) -> WorkflowPublic:
        """Absent fields keep their value; the result is checked whole. Each change is a new version."""
        return await service.update_workflow(db_session, scope=tenant, actor=actor, workflow_id=workflow_id, data=data)

    @delete("/{workflow_id:str}", opt=access(Role.DEVELOPER), status_code=HTTP_200_OK, summary="Delete a workflow")
    async def delete_workflow(
        self, db_session: DbSession, tenant: CurrentTenant, actor: CurrentActor, workflow_id: FromPath[str]
    ) -> WorkflowDeleted:
        """Hide the workflow; its versions stay for the runs that used them."""
        return await service.delete_workflow(db_session, scope=tenant, actor=actor, workflow_id=workflow_id)

    @get("/{workflow_id:str}/versions", opt=access(Role.VIEWER), summary="List a workflow's versions")
    async def list_workflow_versions(
        self, db_session: DbSession, tenant: CurrentTenant, workflow_id: FromPath[str], page: PageParams
    ) -> Page[WorkflowVersionPublic]:
        return await service.list_versions(db_session, scope=tenant, workflow_id=workflow_id, params=page)

    @get(
        "/{workflow_id:str}/export",
        opt=access(Role.VIEWER),
        summary="Export a workflow as code",
        responses=answers(
            HTTP_200_OK, "A Python module that runs the workflow with openai-agents.", {"text/x-python": str}
        ),
    )
    async def export_workflow(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        workflow_id: FromPath[str],
        output: Annotated[
            Literal["agents-sdk"], QueryParameter(name="format", description="agents-sdk: a module for openai-agents.")
        ] = "agents-sdk",
    ) -> Response[str]:
        """The workflow's latest version as a runnable Python module: the graph runs in it (the server's own
        interpreter), each agent node asks the agent on this server through openai-agents."""
        module = await service.export_workflow(db_session, scope=tenant, workflow_id=workflow_id)
        disposition = f'attachment; filename="{workflow_id}.py"'
        return Response(module, media_type="text/x-python", headers={"content-disposition": disposition})
