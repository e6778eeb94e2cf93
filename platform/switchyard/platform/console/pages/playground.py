"""The playground: chat with an agent, its answers streamed, tool calls shown as they happen, pending calls
decided here, and each answer's compute (tokens, chip-µs, TTFT and the replica of every model call).

A conversation is a thread: the first message makes it, each next one is a new run on it. A run's page streams
the run's events (``/events``: the runs package's own event stream, as the API serves it) into the page with
``console.js``; when the stream ends the page asks for the answer as the server renders it (``/result``). Without
JavaScript the page refreshes itself until the run ends. Runs, messages and decisions go through the same services
as the API, so its rules (roles, a thread's one active run, approvals audited) hold here as well.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import FormMultiDict
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Stream
from pydantic import ValidationError

from switchyard.agents import TERMINAL_STATUSES, StepType
from switchyard.agents.tools.file_search import FileSearchHit, citations, hits_of
from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.queries import thread_of_run
from switchyard.platform.console.render import SECURITY_HEADERS, render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.bodies import MAX_STORED_INTEGER
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.jobs import jobs_for
from switchyard.platform.runs import service as runs
from switchyard.platform.runs.schemas import RunCreate, SubmitApprovals, SubmitToolOutputs
from switchyard.platform.runs.stream import last_event_number, run_events
from switchyard.platform.threads.schemas import MessageCreate, MessagePublic, ThreadCreate
from switchyard.platform.threads.service import add_message, create_thread, list_messages

__all__ = ["PlaygroundController"]

_ALL = CursorParams(limit=100, after=None, before=None, order="asc")
_TERMINAL = {status.value for status in TERMINAL_STATUSES}
_SSE_HEADERS = {**SECURITY_HEADERS, "cache-control": "no-cache, no-store", "x-accel-buffering": "no"}


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


async def _thread_of(db_session: DbSession, scope: TenantScope, run_id: str) -> str:
    thread_id = await thread_of_run(db_session, scope=scope, run_id=run_id)
    if thread_id is None:
        raise NotFound(f"no run {run_id!r}", param="run_id")
    return thread_id


async def _result(db_session: DbSession, scope: TenantScope, run_id: str) -> dict[str, Any]:
    """The conversation as it stands: the thread's messages, the run, its model calls' compute, what it waits for,
    and the last event the page has seen (the stream continues after it)."""
    thread_id = await _thread_of(db_session, scope, run_id)
    after = await last_event_number(db_session, scope, run_id)  # before the messages: a message is shown twice at most
    run = await runs.get_run(db_session, scope=scope, thread_id=thread_id, run_id=run_id)
    messages = await list_messages(db_session, scope=scope, thread_id=thread_id, params=_ALL)
    steps = await runs.list_steps(db_session, scope=scope, thread_id=thread_id, run_id=run_id, params=_ALL)
    action = run.required_action or {}
    pending = (action.get("approval") or action.get("submit_tool_outputs") or {}).get("tool_calls", [])
    return {
        "run": run,
        "messages": messages.data,
        "cited": _cited(messages.data),
        "model_calls": [s for s in steps.data if s.type == StepType.MODEL_CALL and s.status != "in_progress"],
        "pending": pending,
        "action": action.get("type"),
        "after": after,
        "done": run.status in _TERMINAL,
        "live": run.status not in _TERMINAL and run.status != "requires_action",
    }


def _cited(messages: list[MessagePublic]) -> dict[str, list[str]]:
    """The files each answer cites, by message id: those whose passages, found by the file searches before it,
    the answer repeats (what a Responses answer's ``file_citation`` annotations name)."""
    found: list[FileSearchHit] = []
    cited: dict[str, list[str]] = {}
    for message in messages:
        if message.role == "tool":
            found += hits_of(message.content) or []
        elif message.role == "assistant" and message.content and found:
            cited[message.id] = [citation["filename"] for citation in citations(message.content, found)]
    return cited


def _text(form: FormMultiDict, name: str) -> str:
    return str(form.get(name, ""))


def _decisions(form: FormMultiDict) -> dict[str, bool] | None:
    """The form's approvals, ``{call id: approved}``: one ``decision`` for every ``tool_call_id`` (Approve all),
    else a ``decision:<call id>`` each; None when the form decides nothing (it gives outputs)."""
    if "decision" in form:
        calls = [str(call_id) for call_id in form.getall("tool_call_id", [])]
        return {call_id: _approves(_text(form, "decision")) for call_id in calls}
    chosen = {k.removeprefix("decision:"): str(v) for k, v in form.multi_items() if k.startswith("decision:")}
    if not chosen:
        return None
    return {call_id: _approves(value, call_id) for call_id, value in chosen.items()}


def _approves(decision: str, call_id: str | None = None) -> bool:
    if decision not in ("approve", "deny"):
        on = f" on {call_id}" if call_id else ""
        raise InvalidRequest(f"the decision{on} is approve or deny", param=f"decision:{call_id}" if on else "decision")
    return decision == "approve"


class PlaygroundController(Controller):
    path = "/playground"

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        result: dict[str, Any] | None,
        *,
        status_code: int = 200,
        error: str | None = None,
    ) -> Response[str]:
        agents = await list_agents(db_session, scope=console_user(request).scope, params=_ALL)
        return render(
            request, "playground.html", status_code=status_code, agents=agents.data, result=result, error=error
        )

    @get("/", opt=console_access(Role.DEVELOPER))
    async def playground(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[str]:
        """A new chat."""
        return await self._page(request, db_session, None)

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def send(self, request: Request[Any, Any, Any], db_session: DbSession) -> Response[Any]:
        """The first message of a new chat: a new thread, and a run of the chosen agent on it."""
        user = console_user(request)
        form = await request.form()
        try:
            thread_data = ThreadCreate.model_validate({"messages": [{"content": _text(form, "message")}]})
            run_data = RunCreate.model_validate({"agent_id": _text(form, "agent_id")})
        except ValidationError:
            return await self._page(request, db_session, None, status_code=400, error="Write a message.")
        await self._admit(request, db_session, None, run_data, thread_data.messages)
        thread = await create_thread(db_session, scope=user.scope, actor=_actor(request), data=thread_data)
        return await self._run(request, db_session, thread.id, run_data)

    async def _admit(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        thread_id: str | None,
        data: RunCreate,
        messages: list[MessageCreate],
    ) -> None:
        """The run's first model call, admitted before the page writes its thread or message (429/402)."""
        scope = console_user(request).scope
        await runs.admit_run(
            db_session,
            scope=scope,
            actor=_actor(request),
            agent_id=data.agent_id,
            agent_version=data.agent_version,
            thread_id=thread_id,
            new_messages=messages,
            check_model=model_check(request, scope),
            admission=request.app.state.gateway.admission,
        )

    async def _run(
        self, request: Request[Any, Any, Any], db_session: DbSession, thread_id: str, data: RunCreate
    ) -> Response[Any]:
        scope = console_user(request).scope
        run = await runs.create_run(
            db_session,
            scope=scope,
            actor=_actor(request),
            thread_id=thread_id,
            data=data,
            check_model=model_check(request, scope),
            jobs=jobs_for(request.app.state),
            admission=None,  # admitted before its thread or message was written
        )
        return Redirect(f"{CONSOLE_PREFIX}/playground/{run.id}", status_code=303)

    @post("/{run_id:str}/messages", opt=console_access(Role.DEVELOPER), status_code=303)
    async def reply(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[Any]:
        """The next message of the conversation ``run_id`` belongs to: added to its thread, then a new run on it
        (of the agent chosen, by default the one of ``run_id``)."""
        scope = console_user(request).scope
        thread_id = await _thread_of(db_session, scope, run_id)
        form = await request.form()
        try:
            message = MessageCreate.model_validate({"content": _text(form, "message")})
            agent_id = _text(form, "agent_id") or (await runs.run_row(db_session, scope, thread_id, run_id)).agent_id
            run_data = RunCreate.model_validate({"agent_id": agent_id})
        except ValidationError:
            result = await _result(db_session, scope, run_id)
            return await self._page(request, db_session, result, status_code=400, error="Write a message.")
        await self._admit(request, db_session, thread_id, run_data, [message])
        await add_message(db_session, scope=scope, actor=_actor(request), thread_id=thread_id, data=message)
        return await self._run(request, db_session, thread_id, run_data)

    @get("/{run_id:str}", opt=console_access(Role.DEVELOPER))
    async def conversation(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        result = await _result(db_session, console_user(request).scope, run_id)
        return await self._page(request, db_session, result)

    @get("/{run_id:str}/result", opt=console_access(Role.DEVELOPER))
    async def result(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        """The conversation as the server renders it (a fragment the page swaps in when its stream ends)."""
        result = await _result(db_session, console_user(request).scope, run_id)
        return render(request, "playground_result.html", result=result)

    @get("/{run_id:str}/events", opt=console_access(Role.VIEWER))
    async def events(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        run_id: FromPath[str],
        starting_after: FromQuery[int] = 0,
    ) -> Stream:
        """The run's events as server-sent events (the API's stream of ``.../runs/{id}/events``), after
        ``starting_after``, until the run ends or waits for a decision (``event: done``)."""
        scope = console_user(request).scope
        await _thread_of(db_session, scope, run_id)
        if not 0 <= starting_after <= MAX_STORED_INTEGER:
            raise InvalidRequest("starting_after must be a sequence number", param="starting_after")
        events = run_events(request.app.state.database, scope, run_id, starting_after=starting_after)
        return Stream(events, media_type="text/event-stream", headers=_SSE_HEADERS, status_code=200)

    @post("/{pending_run_id:str}/required_action", opt=console_access(Role.DEVELOPER), status_code=303)
    async def decide(
        self, request: Request[Any, Any, Any], db_session: DbSession, pending_run_id: FromPath[str]
    ) -> Response[Any]:
        """What the run waits for: decisions on its calls awaiting approval (``decision``: approve or deny, for
        every call listed as ``tool_call_id``; or ``decision:<call id>`` for each call), or the outputs of its
        function calls (``output:<call id>``)."""
        scope = console_user(request).scope
        thread_id = await _thread_of(db_session, scope, pending_run_id)
        form = await request.form()
        actor, jobs = _actor(request), jobs_for(request.app.state)
        decisions = _decisions(form)
        try:
            if decisions is not None:
                approvals = SubmitApprovals.model_validate(
                    {"approvals": [{"tool_call_id": c, "approve": approve} for c, approve in decisions.items()]}
                )
            else:
                outputs = SubmitToolOutputs.model_validate(
                    {
                        "tool_outputs": [
                            {"tool_call_id": name.removeprefix("output:"), "output": str(value)}
                            for name, value in form.multi_items()
                            if name.startswith("output:")
                        ]
                    }
                )
        except ValidationError:
            raise InvalidRequest("choose approve or deny, or give every call's output", param="decision") from None
        if decisions is not None:
            await runs.submit_approvals(
                db_session,
                scope=scope,
                actor=actor,
                thread_id=thread_id,
                run_id=pending_run_id,
                data=approvals,
                jobs=jobs,
            )
        else:
            await runs.submit_tool_outputs(
                db_session,
                scope=scope,
                actor=actor,
                thread_id=thread_id,
                run_id=pending_run_id,
                data=outputs,
                jobs=jobs,
            )
        return Redirect(f"{CONSOLE_PREFIX}/playground/{pending_run_id}", status_code=303)
