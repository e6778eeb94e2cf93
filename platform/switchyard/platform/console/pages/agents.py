"""Agents: list, build (every field of a version: model and parameters, instructions, tools, handoffs,
guardrails, limits, metadata), show with its versions and what each changed, edit (each edit a new version),
delete after asking. A thin layer over agent_registry: saved through the service the API uses."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.platform.admission import served_models
from switchyard.platform.agent_registry import service
from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.agent_registry.schemas import AgentCreate, AgentPublic, AgentUpdate, AgentVersionPublic
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.agent_fields import (
    GUARDRAIL_TYPES,
    HANDOFF_FIELDS,
    LIMIT_FIELDS,
    MODEL_PARAM_FIELDS,
    OUTPUT_FIELDS,
    TOOL_TYPES,
    field_id,
    guardrail_fields,
    tool_fields,
)
from switchyard.platform.console.pages.agent_form import Draft, param_path, place, validation_errors
from switchyard.platform.console.pages.agent_view import describe_guardrail, describe_tool, field_changes
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.bodies import MAX_STORED_INTEGER
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of

__all__ = ["AgentPagesController", "changed_fields"]

AGENT_CHOICES_PAGES = 5
"""At most this many pages of 100 of the tenant's agents are offered as handoffs, agent tools and judges."""


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


def _models(request: Request[Any, Any, Any]) -> list[str]:
    pool = request.app.state.gateway.pool
    backends = served_models(pool, console_user(request).scope.tenant_id)
    return sorted(b.name for b in backends if getattr(b.spec, "task", "chat") == "chat")  # no embedding models


async def _agent_choices(db_session: DbSession, scope: TenantScope) -> list[AgentPublic]:
    """The tenant's agents, by name (what handoffs, agent tools and agent judges pick from)."""
    found: list[AgentPublic] = []
    after: str | None = None
    for _ in range(AGENT_CHOICES_PAGES):
        page = await service.list_agents(
            db_session, scope=scope, params=CursorParams(limit=100, after=after, before=None, order="desc")
        )
        found.extend(page.data)
        if not page.has_more:
            break
        after = page.last_id
    return sorted(found, key=lambda agent: agent.name.lower())


def changed_fields(spec: AgentCreate, agent: AgentPublic) -> dict[str, Any]:
    """The fields of ``spec`` whose value differs from ``agent``'s (what an edit changes, and its audit entry
    lists): MCP headers sent back as ``<redacted>`` read as unchanged, as the service keeps them."""
    current = agent.model_dump(mode="json")
    wanted = spec.model_dump(mode="json")
    return {key: wanted[key] for key in AgentUpdate.model_fields if wanted[key] != current[key]}


def _focus_after(op: str, draft: Draft) -> str:
    """The field a person lands on after adding a row (its first field) or removing one (the section's add)."""
    verb, _, target = op.partition(":")
    if verb == "add":
        rows = {"tools": draft.tools, "handoffs": draft.handoffs}
        rows.update({f"guardrails.{w}": r for w, r in draft.guardrails.items()})
        if rows.get(target):
            row = rows[target][-1]
            keys = [key for key in row if key != "type"]
            return f"{target}.{len(rows[target]) - 1}.{keys[0]}" if keys else ""
    return f"add-{target.rpartition('.')[0] if verb == 'remove' else target}"


class AgentPagesController(Controller):
    path = "/agents"

    @get("/", opt=console_access(Role.VIEWER))
    async def list_agents(
        self, request: Request[Any, Any, Any], db_session: DbSession, after: FromQuery[str | None] = None
    ) -> Response[str]:
        user = console_user(request)
        page = await service.list_agents(
            db_session, scope=user.scope, params=CursorParams(limit=50, after=after, before=None, order="desc")
        )
        return render(
            request,
            "agents.html",
            agents=page.data,
            has_more=page.has_more,
            last_id=page.last_id,
            can_edit=user.role.includes(Role.DEVELOPER),
        )

    @get("/new", opt=console_access(Role.DEVELOPER))
    async def new_agent(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        return await self._form(request, db_session, draft=Draft.of_agent(None))

    async def _form(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        *,
        draft: Draft,
        agent: AgentPublic | None = None,
        errors: dict[str, str] | None = None,
        focus: str = "",
    ) -> Response[str]:
        models = _models(request)
        if draft.scalars.get("model") and draft.scalars["model"] not in models:
            models.append(draft.scalars["model"])  # kept as it is, not silently switched to another
        return render(
            request,
            "agent_form.html",
            status_code=400 if errors else 200,
            heading=f"Edit {agent.name}" if agent else "New agent",
            action=f"{CONSOLE_PREFIX}/agents/{agent.id}" if agent else f"{CONSOLE_PREFIX}/agents",
            submit=f"Save as version {agent.version + 1}" if agent else "Create agent",
            cancel=f"{CONSOLE_PREFIX}/agents/{agent.id}" if agent else f"{CONSOLE_PREFIX}/agents",
            models=models,
            agents=await _agent_choices(db_session, console_user(request).scope),
            draft=draft,
            errors=errors or {},
            focus=focus,
            tool_types=TOOL_TYPES,
            guardrail_types=GUARDRAIL_TYPES,
            handoff_fields=HANDOFF_FIELDS,
            model_param_fields=MODEL_PARAM_FIELDS,
            output_fields=OUTPUT_FIELDS,
            limit_fields=LIMIT_FIELDS,
            tool_fields=tool_fields,
            guardrail_fields=guardrail_fields,
            field_id=field_id,
        )

    async def _submit(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent: AgentPublic | None
    ) -> Response[Any]:
        """Save the form through the agent service (the API's), or add or remove a row and show it again."""
        user = console_user(request)
        form = await request.form()
        draft = Draft.of_form(form)
        op = str(form.get("op") or "save")
        if op != "save" and draft.apply(op, form):
            return await self._form(request, db_session, draft=draft, agent=agent, focus=_focus_after(op, draft))
        definition, problems = draft.definition()
        names = draft.field_names()
        errors: dict[str, str] = {}
        for name, message in problems.items():
            place(errors, names, name, message)
        if errors:
            return await self._form(request, db_session, draft=draft, agent=agent, errors=errors)
        try:
            spec = AgentCreate.model_validate(definition)
            if agent is None:
                saved = await service.create_agent(
                    db_session,
                    scope=user.scope,
                    actor=_actor(request),
                    data=spec,
                    check_model=model_check(request, user.scope),
                    max_output_tokens=request.app.state.settings.max_output_tokens,
                )
                return Redirect(f"{CONSOLE_PREFIX}/agents/{saved.id}", status_code=303)
            changes = changed_fields(spec, agent)
            if changes:  # nothing changed: no version, no audit entry
                await service.update_agent(
                    db_session,
                    scope=user.scope,
                    actor=_actor(request),
                    agent_id=agent.id,
                    data=AgentUpdate.model_validate(changes),
                    check_model=model_check(request, user.scope),
                    max_output_tokens=request.app.state.settings.max_output_tokens,
                )
        except ValidationError as error:
            errors = validation_errors(error, names)
        except ApiError as error:
            path = param_path(error.param or "")
            if error.status_code in (403, 404) and not (path and path.split(".")[0] in names):
                raise  # not about the form (the agent itself is gone)
            place(errors, names, path, error.message)
        if errors:
            return await self._form(request, db_session, draft=draft, agent=agent, errors=errors)
        assert agent is not None
        return Redirect(f"{CONSOLE_PREFIX}/agents/{agent.id}", status_code=303)

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def create_agent(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        return await self._submit(request, db_session, None)

    @post("/check-schema", opt=console_access(Role.DEVELOPER), status_code=200)
    async def check_schema(self, request: Request[Any, Any, Any]) -> Response[Any]:
        """Whether a JSON Schema is one the agent spec takes, as the form's script asks while a person types:
        ``kind`` ``parameters`` (a function tool's) or ``schema`` (a guardrail's); checked by the API's schema."""
        form = await request.form()
        text, kind = str(form.get("schema", "")), str(form.get("kind", "parameters"))
        draft = Draft()
        if kind == "schema":
            draft.guardrails["output"].append({"type": "json_schema", "name": "", "schema": text})
        else:
            draft.tools.append({"type": "function", "name": "check", "description": "", "parameters": text})
        definition, problems = draft.definition()
        message = next(iter(problems.values()), "")
        if not message:
            try:
                AgentUpdate.model_validate({key: definition[key] for key in ("tools", "guardrails")})
            except ValidationError as error:
                message = "; ".join(validation_errors(error, set()).values())
        return Response({"valid": not message, "message": message}, headers=SECURITY_HEADERS)

    @get("/{agent_id:str}", opt=console_access(Role.VIEWER))
    async def show_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[str]:
        user = console_user(request)
        agent = await service.get_agent(db_session, scope=user.scope, agent_id=agent_id)
        versions = await service.list_versions(
            db_session,
            scope=user.scope,
            agent_id=agent_id,
            params=CursorParams(limit=100, after=None, before=None, order="desc"),
        )
        names = {a.id: a.name for a in await _agent_choices(db_session, user.scope)}
        return render(
            request,
            "agent.html",
            agent=agent,
            versions=versions.data,
            can_edit=user.role.includes(Role.DEVELOPER),
            tools=[describe_tool(tool, names) for tool in agent.tools],
            handoffs=[(names.get(h["agent_id"], h["agent_id"]), h) for h in agent.handoffs],
            guardrails={
                w: [describe_guardrail(g, names) for g in agent.guardrails.get(w, [])] for w in ("input", "output")
            },
        )

    @get("/{agent_id:str}/edit", opt=console_access(Role.DEVELOPER))
    async def edit_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[str]:
        agent = await service.get_agent(db_session, scope=console_user(request).scope, agent_id=agent_id)
        return await self._form(request, db_session, draft=Draft.of_agent(agent), agent=agent)

    @post("/{agent_id:str}", opt=console_access(Role.DEVELOPER), status_code=303)
    async def update_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[Any]:
        agent = await service.get_agent(db_session, scope=console_user(request).scope, agent_id=agent_id)
        return await self._submit(request, db_session, agent)

    @get("/{agent_id:str}/versions/{version:int}/diff", opt=console_access(Role.VIEWER))
    async def diff(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str], version: FromPath[int]
    ) -> Response[str]:
        """What version ``version`` changed against the one before it, field by field."""
        scope = console_user(request).scope
        if version < 2:
            raise NotFound("version 1 has no version before it", param="version")
        if version > MAX_STORED_INTEGER:  # no agent has that many versions, and the database cannot be asked
            raise NotFound(f"agent {agent_id!r} has no version {version}", param="version")
        _, newer = await service.get_version(db_session, scope=scope, agent_id=agent_id, version=version)
        agent, older = await service.get_version(db_session, scope=scope, agent_id=agent_id, version=version - 1)
        names = {a.id: a.name for a in await _agent_choices(db_session, scope)}
        changes = field_changes(
            AgentVersionPublic.of(older).model_dump(mode="json"),
            AgentVersionPublic.of(newer).model_dump(mode="json"),
            names,
        )
        return render(request, "agent_diff.html", agent=agent, version=version, changes=changes)

    @get("/{agent_id:str}/delete", opt=console_access(Role.DEVELOPER))
    async def confirm_delete(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[str]:
        """Asks before deleting (a page of its own: it needs no script)."""
        agent = await service.get_agent(db_session, scope=console_user(request).scope, agent_id=agent_id)
        return render(request, "agent_delete.html", agent=agent)

    @post("/{agent_id:str}/delete", opt=console_access(Role.DEVELOPER), status_code=303)
    async def delete(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[Any]:
        """Delete the agent (hidden; its versions stay for the runs that used them)."""
        await service.delete_agent(
            db_session, scope=console_user(request).scope, actor=_actor(request), agent_id=agent_id
        )
        return Redirect(f"{CONSOLE_PREFIX}/agents", status_code=303)
