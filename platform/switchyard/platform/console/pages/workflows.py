"""Workflows: list, create (a name and an agent: start → agent → end), edit in a list of the graph's nodes beside
its canvas (each save a new version, checked as the API checks it, errors shown on the node they concern), the
versions, and delete after asking. A thin layer over the workflow service the API uses; workflows have versions
and no separate publishing: new runs take the latest version."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.agent_registry.schemas import AgentPublic
from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.agent_fields import field_id
from switchyard.platform.console.pages.workflow_canvas import draw
from switchyard.platform.console.pages.workflow_fields import NODE_TYPES, STATE_TYPES, node_fields
from switchyard.platform.console.pages.workflow_form import WorkflowDraft, starting_graph, workflow_errors
from switchyard.platform.console.render import render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import ApiError
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.workflows import service
from switchyard.platform.workflows.schemas import WorkflowCreate, WorkflowPublic, WorkflowUpdate

__all__ = ["WorkflowPagesController"]

_NEWEST = CursorParams(limit=100, after=None, before=None, order="desc")


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


async def _agents(db_session: DbSession, scope: TenantScope) -> list[AgentPublic]:
    """The tenant's newest agents, by name (what agent nodes pick from)."""
    page = await list_agents(db_session, scope=scope, params=_NEWEST)
    return sorted(page.data, key=lambda agent: agent.name.lower())


async def editor(
    request: Request[Any, Any, Any],
    db_session: DbSession,
    workflow: WorkflowPublic,
    draft: WorkflowDraft,
    *,
    errors: dict[str, str] | None = None,
    focus: str = "",
    saved: bool = False,
) -> Response[str]:
    """The editor page of ``workflow`` showing ``draft`` (as saved, or as a refused form sent it)."""
    user = console_user(request)
    versions = await service.list_versions(db_session, scope=user.scope, workflow_id=workflow.id, params=_NEWEST)
    return render(
        request,
        "workflow.html",
        status_code=400 if errors else 200,
        workflow=workflow,
        draft=draft,
        errors=errors or {},
        focus=focus,
        saved=saved,
        versions=versions.data,
        agents=await _agents(db_session, user.scope),
        can_edit=user.role.includes(Role.DEVELOPER),
        canvas=draw(draft.nodes, draft.scalars["start"].strip()),
        node_types=NODE_TYPES,
        state_types=STATE_TYPES,
        node_fields=node_fields,
        field_id=field_id,
    )


class WorkflowPagesController(Controller):
    path = "/workflows"

    @get("/", opt=console_access(Role.VIEWER))
    async def list_workflows(
        self, request: Request[Any, Any, Any], db_session: DbSession, after: FromQuery[str | None] = None
    ) -> Response[str]:
        user = console_user(request)
        page = await service.list_workflows(
            db_session, scope=user.scope, params=CursorParams(limit=50, after=after, before=None, order="desc")
        )
        return render(
            request,
            "workflows.html",
            workflows=page.data,
            has_more=page.has_more,
            last_id=page.last_id,
            can_edit=user.role.includes(Role.DEVELOPER),
        )

    async def _new_form(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        form: dict[str, str] | None = None,
        errors: dict[str, str] | None = None,
    ) -> Response[str]:
        return render(
            request,
            "workflow_new.html",
            status_code=400 if errors else 200,
            agents=await _agents(db_session, console_user(request).scope),
            form=form or {"name": "", "agent_id": ""},
            errors=errors or {},
        )

    @get("/new", opt=console_access(Role.DEVELOPER))
    async def new_workflow(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._new_form(request, db_session)

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def create_workflow(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        """A new workflow (version 1) whose start asks the chosen agent, then ends with its answer."""
        form = await request.form()
        sent = {key: str(form.get(key, "")).strip() for key in ("name", "agent_id")}
        errors: dict[str, str] = {}
        if not sent["agent_id"]:
            errors["agent_id"] = "choose the agent the workflow starts with"
        try:
            data = WorkflowCreate.model_validate(starting_graph(sent["name"], sent["agent_id"] or "agent_none"))
        except ValidationError as error:
            for item in error.errors():
                key = "name" if item["loc"][:1] == ("name",) else "agent_id"
                errors.setdefault(key, str(item["msg"]).removeprefix("Value error, "))
        if errors:
            return await self._new_form(request, db_session, form=sent, errors=errors)
        try:
            created = await service.create_workflow(
                db_session, scope=console_user(request).scope, actor=_actor(request), data=data
            )
        except ApiError as error:
            return await self._new_form(request, db_session, form=sent, errors={"agent_id": error.message})
        return Redirect(f"{CONSOLE_PREFIX}/workflows/{created.id}", status_code=303)

    @get("/{workflow_id:str}", opt=console_access(Role.VIEWER))
    async def show_workflow(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        workflow_id: FromPath[str],
        saved: FromQuery[str | None] = None,
    ) -> Response[str]:
        """The editor (read-only below developer): the list of nodes, the canvas, the versions."""
        workflow = await service.get_workflow(db_session, scope=console_user(request).scope, workflow_id=workflow_id)
        draft = WorkflowDraft.of_workflow(workflow)
        return await editor(request, db_session, workflow, draft, saved=saved is not None)

    @post("/{workflow_id:str}", opt=console_access(Role.DEVELOPER), status_code=303)
    async def save_workflow(
        self, request: Request[Any, Any, Any], db_session: DbSession, workflow_id: FromPath[str]
    ) -> Response[Any]:
        """Save the form as a new version (through the service the API uses), or add or remove a node or variable
        and show the form again; a refused save changes nothing and shows the form as sent."""
        scope = console_user(request).scope
        workflow = await service.get_workflow(db_session, scope=scope, workflow_id=workflow_id)
        form = await request.form()
        draft = WorkflowDraft.of_form(form)
        op = str(form.get("op") or "save")
        focus = draft.apply(op, form) if op != "save" else None
        if focus is not None:
            return await editor(request, db_session, workflow, draft, focus=focus)
        definition, problems = draft.definition()
        errors = dict(problems)
        if not errors:
            try:
                WorkflowCreate.model_validate(definition)  # the whole graph, checked as a new workflow is
                await service.update_workflow(
                    db_session,
                    scope=scope,
                    actor=_actor(request),
                    workflow_id=workflow_id,
                    data=WorkflowUpdate.model_validate(definition),
                )
            except ValidationError as error:
                errors = workflow_errors(draft, error)
            except ApiError as error:
                if error.status_code in (403, 404) and not (error.param or "").startswith("nodes"):
                    raise  # not about the form (the workflow itself is gone)
                errors = workflow_errors(draft, None, error.param or "", error.message)
        if errors:
            return await editor(request, db_session, workflow, draft, errors=errors)
        return Redirect(f"{CONSOLE_PREFIX}/workflows/{workflow_id}?saved=1", status_code=303)

    @get("/{workflow_id:str}/delete", opt=console_access(Role.DEVELOPER))
    async def confirm_delete(
        self, request: Request[Any, Any, Any], db_session: DbSession, workflow_id: FromPath[str]
    ) -> Response[str]:
        """Asks before deleting (a page of its own: it needs no script)."""
        workflow = await service.get_workflow(db_session, scope=console_user(request).scope, workflow_id=workflow_id)
        return render(request, "workflow_delete.html", workflow=workflow)

    @post("/{workflow_id:str}/delete", opt=console_access(Role.DEVELOPER), status_code=303)
    async def delete_workflow(
        self, request: Request[Any, Any, Any], db_session: DbSession, workflow_id: FromPath[str]
    ) -> Response[Any]:
        """Delete the workflow (hidden; its versions stay for the runs that used them)."""
        await service.delete_workflow(
            db_session, scope=console_user(request).scope, actor=_actor(request), workflow_id=workflow_id
        )
        return Redirect(f"{CONSOLE_PREFIX}/workflows", status_code=303)
