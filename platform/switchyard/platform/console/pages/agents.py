"""Agents: list, create, show with its versions, edit (each edit a new version). A thin layer over agent_registry."""

from __future__ import annotations

import difflib
import json
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
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.bodies import MAX_STORED_INTEGER
from switchyard.platform.http.errors import ApiError, NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of

__all__ = ["AgentPagesController", "version_diff"]

MAX_TOKENS_DIGITS = len(str(MAX_STORED_INTEGER))
"""More digits than this is past any ``max_tokens`` the API takes: refused before ``int()`` reads it."""


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


def _models(request: Request[Any, Any, Any]) -> list[str]:
    pool = request.app.state.gateway.pool
    backends = served_models(pool, console_user(request).scope.tenant_id)
    return sorted(b.name for b in backends if getattr(b.spec, "task", "chat") == "chat")  # no embedding models


class FormProblem(ValueError):
    """A form field that is not what it must be; ``values`` are the fields as typed, to show the form again."""

    def __init__(self, message: str, values: dict[str, Any]) -> None:
        super().__init__(message)
        self.values = values


def _fields(form: Any) -> dict[str, Any]:
    """The agent fields of a submitted form, as the API's schemas take them. ``max_tokens`` is empty (the model's
    default) or ASCII digits a column can hold: ``²`` passes ``str.isdigit`` but not ``int()``, and ``int()`` of
    5,000 digits raises; each is a ``FormProblem``, not a 500. Its range is the API schema's."""
    fields: dict[str, Any] = {
        "name": str(form.get("name", "")).strip(),
        "model": str(form.get("model", "")),
        "instructions": str(form.get("instructions", "")),
    }
    max_tokens = str(form.get("max_tokens", "")).strip()
    if max_tokens and not (max_tokens.isascii() and max_tokens.isdigit() and len(max_tokens) <= MAX_TOKENS_DIGITS):
        raise FormProblem(
            "max tokens is a whole number such as 1024, or empty for the model's default",
            {**fields, "max_tokens": max_tokens[:MAX_TOKENS_DIGITS]},
        )
    fields["model_params"] = {"max_tokens": int(max_tokens)} if max_tokens else {}
    return fields


def version_diff(older: AgentVersionPublic, newer: AgentVersionPublic) -> list[str]:
    """A unified diff of two versions' definitions (JSON, keys sorted), line by line."""

    def lines(version: AgentVersionPublic) -> list[str]:
        definition = version.model_dump(mode="json", exclude={"object", "id", "agent_id", "version", "created_at"})
        return json.dumps(definition, indent=2, sort_keys=True).splitlines()

    return list(difflib.unified_diff(lines(older), lines(newer), f"v{older.version}", f"v{newer.version}", lineterm=""))


def _error_text(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
    return str(getattr(error, "detail", error))


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
    async def new_agent(self, request: Request[Any, Any, Any]) -> Response[str]:
        return self._form(request, values={"name": "", "model": "", "instructions": "", "max_tokens": None})

    def _form(
        self,
        request: Request[Any, Any, Any],
        *,
        values: dict[str, Any],
        agent: AgentPublic | None = None,
        error: str | None = None,
    ) -> Response[str]:
        return render(
            request,
            "agent_form.html",
            status_code=400 if error else 200,
            heading=f"Edit {agent.name}" if agent else "New agent",
            action=f"{CONSOLE_PREFIX}/agents/{agent.id}" if agent else f"{CONSOLE_PREFIX}/agents",
            submit=f"Save as version {agent.version + 1}" if agent else "Create agent",
            models=_models(request),
            values=values,
            error=error,
        )

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def create_agent(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        user = console_user(request)
        try:
            fields = _fields(await request.form())
        except FormProblem as problem:
            return self._form(request, values=problem.values, error=str(problem))
        try:
            created = await service.create_agent(
                db_session,
                scope=user.scope,
                actor=_actor(request),
                data=AgentCreate.model_validate(fields),
                check_model=model_check(request, user.scope),
                max_output_tokens=request.app.state.settings.max_output_tokens,
            )
        except (ValidationError, ApiError) as error:
            if isinstance(error, ApiError) and error.status_code in (403, 404) and "model" not in str(error.detail):
                raise
            values = {**fields, "max_tokens": fields["model_params"].get("max_tokens")}
            return self._form(request, values=values, error=_error_text(error))
        return Redirect(f"{CONSOLE_PREFIX}/agents/{created.id}", status_code=303)

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
        return render(
            request, "agent.html", agent=agent, versions=versions.data, can_edit=user.role.includes(Role.DEVELOPER)
        )

    @get("/{agent_id:str}/edit", opt=console_access(Role.DEVELOPER))
    async def edit_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[str]:
        agent = await service.get_agent(db_session, scope=console_user(request).scope, agent_id=agent_id)
        values = {
            "name": agent.name,
            "model": agent.model,
            "instructions": agent.instructions,
            "max_tokens": agent.model_params.get("max_tokens"),
        }
        return self._form(request, values=values, agent=agent)

    @post("/{agent_id:str}", opt=console_access(Role.DEVELOPER), status_code=303)
    async def update_agent(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[Any]:
        user = console_user(request)
        agent = await service.get_agent(db_session, scope=user.scope, agent_id=agent_id)
        try:
            fields = _fields(await request.form())
        except FormProblem as problem:
            return self._form(request, values=problem.values, agent=agent, error=str(problem))
        current_params = dict(agent.model_params)
        current_params.pop("max_tokens", None)
        fields["model_params"] = {**current_params, **fields["model_params"]}
        try:
            await service.update_agent(
                db_session,
                scope=user.scope,
                actor=_actor(request),
                agent_id=agent_id,
                data=AgentUpdate.model_validate(fields),
                check_model=model_check(request, user.scope),
                max_output_tokens=request.app.state.settings.max_output_tokens,
            )
        except (ValidationError, ApiError) as error:
            if isinstance(error, ApiError) and error.status_code in (403, 404) and "model" not in str(error.detail):
                raise
            values = {**fields, "max_tokens": fields["model_params"].get("max_tokens")}
            return self._form(request, values=values, agent=agent, error=_error_text(error))
        return Redirect(f"{CONSOLE_PREFIX}/agents/{agent_id}", status_code=303)

    @get("/{agent_id:str}/versions/{version:int}/diff", opt=console_access(Role.VIEWER))
    async def diff(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str], version: FromPath[int]
    ) -> Response[str]:
        """What version ``version`` changed against the one before it."""
        scope = console_user(request).scope
        if version < 2:
            raise NotFound("version 1 has no version before it", param="version")
        if version > MAX_STORED_INTEGER:  # no agent has that many versions, and the database cannot be asked
            raise NotFound(f"agent {agent_id!r} has no version {version}", param="version")
        _, newer = await service.get_version(db_session, scope=scope, agent_id=agent_id, version=version)
        agent, older = await service.get_version(db_session, scope=scope, agent_id=agent_id, version=version - 1)
        lines = version_diff(AgentVersionPublic.of(older), AgentVersionPublic.of(newer))
        return render(request, "agent_diff.html", agent=agent, version=version, lines=lines)

    @post("/{agent_id:str}/delete", opt=console_access(Role.DEVELOPER), status_code=303)
    async def delete(
        self, request: Request[Any, Any, Any], db_session: DbSession, agent_id: FromPath[str]
    ) -> Response[Any]:
        """Delete the agent (hidden; its versions stay for the runs that used them)."""
        await service.delete_agent(
            db_session, scope=console_user(request).scope, actor=_actor(request), agent_id=agent_id
        )
        return Redirect(f"{CONSOLE_PREFIX}/agents", status_code=303)
