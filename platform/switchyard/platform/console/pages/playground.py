"""The playground: send an agent a message and watch the run answer, with its compute.

Not streamed token by token yet: the page polls the run's result (htmx, every second) until the run ends, then
shows the thread's messages, tool calls, tokens and chip-µs. Runs go through the same runs service as the API.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.agents import TERMINAL_STATUSES
from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.queries import thread_of_run
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.jobs import jobs_for
from switchyard.platform.runs import service as runs
from switchyard.platform.runs.schemas import RunCreate
from switchyard.platform.threads.schemas import ThreadCreate
from switchyard.platform.threads.service import create_thread, list_messages

__all__ = ["PlaygroundController"]

_ALL = CursorParams(limit=100, after=None, before=None, order="asc")
_TERMINAL = {status.value for status in TERMINAL_STATUSES}


class PlaygroundController(Controller):
    path = "/playground"

    @get("/", opt=console_access(Role.DEVELOPER))
    async def playground(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        agents = await list_agents(db_session, scope=console_user(request).scope, params=_ALL)
        return render(request, "playground.html", agents=agents.data, result=None)

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def send(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        user = console_user(request)
        form = await request.form()
        actor = Actor(key_id=user.member_id, request_id=request_id_of(request.scope))
        try:
            thread_data = ThreadCreate.model_validate({"messages": [{"content": str(form.get("message", ""))}]})
            run_data = RunCreate.model_validate({"agent_id": str(form.get("agent_id", ""))})
        except ValidationError:
            agents = await list_agents(db_session, scope=user.scope, params=_ALL)
            return render(
                request, "playground.html", status_code=400, agents=agents.data, result=None, error="Write a message."
            )
        thread = await create_thread(db_session, scope=user.scope, actor=actor, data=thread_data)
        run = await runs.create_run(
            db_session,
            scope=user.scope,
            actor=actor,
            thread_id=thread.id,
            data=run_data,
            check_model=model_check(request, user.scope),
            jobs=jobs_for(request.app.state),
        )
        return Redirect(f"{CONSOLE_PREFIX}/playground/{run.id}", status_code=303)

    async def _result(self, request: Request[Any, Any, Any], db_session: DbSession, run_id: str) -> dict[str, Any]:
        scope = console_user(request).scope
        thread_id = await thread_of_run(db_session, scope=scope, run_id=run_id)
        if thread_id is None:
            raise NotFound(f"no run {run_id!r}", param="run_id")
        run = await runs.get_run(db_session, scope=scope, thread_id=thread_id, run_id=run_id)
        messages = await list_messages(db_session, scope=scope, thread_id=thread_id, params=_ALL)
        return {"run": run, "messages": messages.data, "done": run.status in _TERMINAL}

    @get("/{run_id:str}", opt=console_access(Role.DEVELOPER))
    async def conversation(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        agents = await list_agents(db_session, scope=console_user(request).scope, params=_ALL)
        result = await self._result(request, db_session, run_id)
        return render(request, "playground.html", agents=agents.data, result=result)

    @get("/{run_id:str}/result", opt=console_access(Role.DEVELOPER))
    async def result(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        """The answer so far (an htmx fragment that asks again every second until the run has ended)."""
        return render(request, "playground_result.html", result=await self._result(request, db_session, run_id))
