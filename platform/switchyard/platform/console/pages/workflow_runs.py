"""Running a workflow from its editor: a message starts a run (a thread and a run of the workflow, as ``POST /v1/runs``
with ``workflow_id`` does), whose page shows the nodes it passes as they come (htmx polls a fragment while the run
moves), the node it is at highlighted on the canvas, and an approval node's question with Approve and Reject.
Runs, messages and decisions go through the services the API uses (admission, a thread's one active run, decisions
audited)."""

from __future__ import annotations

import json
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from pydantic import ValidationError

from switchyard.agents import TERMINAL_STATUSES, RunState
from switchyard.platform.agent_registry.controllers import model_check
from switchyard.platform.agent_registry.versions import get_version
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.workflow_canvas import draw
from switchyard.platform.console.pages.workflow_form import WorkflowDraft
from switchyard.platform.console.queries import thread_of_run
from switchyard.platform.console.render import render
from switchyard.platform.db import TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import InvalidRequest, NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.jobs import jobs_for
from switchyard.platform.runs import service as runs
from switchyard.platform.runs.schemas import RunCreate, SubmitApprovals
from switchyard.platform.threads.schemas import ThreadCreate
from switchyard.platform.threads.service import create_thread, list_messages
from switchyard.platform.workflows.schemas import WorkflowVersionPublic
from switchyard.platform.workflows.service import KIND, get_workflow

__all__ = ["WorkflowRunsController"]

_ALL = CursorParams(limit=100, after=None, before=None, order="asc")
_TERMINAL = {status.value for status in TERMINAL_STATUSES}


def _actor(request: Request[Any, Any, Any]) -> Actor:
    return Actor(key_id=console_user(request).member_id, request_id=request_id_of(request.scope))


async def _thread_of(db_session: DbSession, scope: TenantScope, workflow_id: str, run_id: str) -> str:
    """The thread of ``run_id``, a run of ``workflow_id`` (404 otherwise, as for another tenant's run)."""
    thread_id = await thread_of_run(db_session, scope=scope, run_id=run_id)
    if thread_id is None or (await runs.run_row(db_session, scope, thread_id, run_id)).agent_id != workflow_id:
        raise NotFound(f"workflow {workflow_id!r} has no run {run_id!r}", param="run_id")
    return thread_id


def _approval(action: dict[str, Any] | None) -> dict[str, str] | None:
    """The call a run waits on for a decision (an approval node's question, or a tool node's call), if any."""
    calls = ((action or {}).get("approval") or {}).get("tool_calls") or []
    if not calls:
        return None
    call = calls[0]["function"]
    try:
        message = str(json.loads(call["arguments"]).get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    return {"id": calls[0]["id"], "name": call["name"], "message": message or f"{call['name']}({call['arguments']})"}


async def progress(db_session: DbSession, scope: TenantScope, workflow_id: str, run_id: str) -> dict[str, Any]:
    """Where the run stands: its status, the nodes it passed (and what happened at each), the node it is at on the
    canvas of the version it runs, what it waits for, and the thread's messages (its input and answer)."""
    thread_id = await _thread_of(db_session, scope, workflow_id, run_id)
    row = await runs.run_row(db_session, scope, thread_id, run_id)
    run = await runs.get_run(db_session, scope=scope, thread_id=thread_id, run_id=run_id)
    flow = RunState.model_validate(row.state).workflow
    _, version = await get_version(db_session, scope=scope, agent_id=workflow_id, version=row.agent_version, kind=KIND)
    draft = WorkflowDraft.of_workflow(WorkflowVersionPublic.of(version))
    messages = await list_messages(db_session, scope=scope, thread_id=thread_id, params=_ALL)
    trail = flow.trail if flow is not None else []
    finished = run.status in _TERMINAL
    at = flow.node if flow is not None and not finished else None
    return {
        "run": run,
        "trail": trail,
        "at": at,
        "error": flow.error if flow is not None else None,
        "messages": messages.data,
        "approval": _approval(run.required_action),
        "live": not finished and run.status != "requires_action",
        "canvas": draw(draft.nodes, draft.scalars["start"], active=at, passed=frozenset(e.node for e in trail)),
        "nodes": {row["id"]: row for row in draft.nodes},
    }


class WorkflowRunsController(Controller):
    path = "/workflows/{workflow_id:str}/runs"

    @post("/", opt=console_access(Role.DEVELOPER), status_code=303)
    async def start_run(
        self, request: Request[Any, Any, Any], db_session: DbSession, workflow_id: FromPath[str]
    ) -> Response[Any]:
        """Run the workflow's latest version on a message (a new thread), admitted before anything is written."""
        scope, actor = console_user(request).scope, _actor(request)
        await get_workflow(db_session, scope=scope, workflow_id=workflow_id)
        form = await request.form()
        try:
            thread_data = ThreadCreate.model_validate({"messages": [{"content": str(form.get("message", ""))}]})
        except ValidationError:
            raise InvalidRequest("write the message the workflow starts from", param="message") from None
        run_data = RunCreate.model_validate({"workflow_id": workflow_id})
        await runs.admit_run(
            db_session,
            scope=scope,
            actor=actor,
            agent_id=workflow_id,
            agent_version=None,
            thread_id=None,
            new_messages=thread_data.messages,
            check_model=model_check(request, scope),
            admission=request.app.state.gateway.admission,
        )
        thread = await create_thread(db_session, scope=scope, actor=actor, data=thread_data)
        run = await runs.create_run(
            db_session,
            scope=scope,
            actor=actor,
            thread_id=thread.id,
            data=run_data,
            check_model=model_check(request, scope),
            jobs=jobs_for(request.app.state),
            admission=None,  # admitted above, before its thread was written
        )
        return Redirect(f"{CONSOLE_PREFIX}/workflows/{workflow_id}/runs/{run.id}", status_code=303)

    @get("/{workflow_run_id:str}", opt=console_access(Role.DEVELOPER))
    async def run_page(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        workflow_id: FromPath[str],
        workflow_run_id: FromPath[str],
    ) -> Response[str]:
        scope = console_user(request).scope
        workflow = await get_workflow(db_session, scope=scope, workflow_id=workflow_id)
        result = await progress(db_session, scope, workflow_id, workflow_run_id)
        return render(request, "workflow_run.html", workflow=workflow, result=result)

    @get("/{workflow_run_id:str}/progress", opt=console_access(Role.DEVELOPER))
    async def run_progress(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        workflow_id: FromPath[str],
        workflow_run_id: FromPath[str],
    ) -> Response[str]:
        """The run as it stands (the fragment the page polls while the run moves)."""
        result = await progress(db_session, console_user(request).scope, workflow_id, workflow_run_id)
        return render(request, "workflow_run_progress.html", workflow_id=workflow_id, result=result)

    @post("/{workflow_run_id:str}/approval", opt=console_access(Role.DEVELOPER), status_code=303)
    async def decide(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        workflow_id: FromPath[str],
        workflow_run_id: FromPath[str],
    ) -> Response[Any]:
        """Approve or reject what the run waits on (``decision`` approve or reject, for ``tool_call_id``)."""
        scope = console_user(request).scope
        thread_id = await _thread_of(db_session, scope, workflow_id, workflow_run_id)
        form = await request.form()
        decision = str(form.get("decision", ""))
        if decision not in ("approve", "reject"):
            raise InvalidRequest("the decision is approve or reject", param="decision")
        try:
            data = SubmitApprovals.model_validate(
                {"approvals": [{"tool_call_id": str(form.get("tool_call_id", "")), "approve": decision == "approve"}]}
            )
        except ValidationError:
            raise InvalidRequest("the form names no call to decide on", param="tool_call_id") from None
        await runs.submit_approvals(
            db_session,
            scope=scope,
            actor=_actor(request),
            thread_id=thread_id,
            run_id=workflow_run_id,
            data=data,
            jobs=jobs_for(request.app.state),
        )
        return Redirect(f"{CONSOLE_PREFIX}/workflows/{workflow_id}/runs/{workflow_run_id}", status_code=303)
