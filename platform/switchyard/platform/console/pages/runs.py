"""Runs: every execution of the tenant (agent and workflow runs, responses, chat completions) in one list that a
pasted id searches, and each one's trace (its input, answer, steps and timeline)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import quote

from litestar import Controller, Request, Response, get
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect

from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.periods import month_start
from switchyard.platform.console.edge import CONSOLE_PREFIX, console_access, console_user
from switchyard.platform.console.pages.trace_pages import chat_trace, response_trace, run_trace
from switchyard.platform.console.queries import EXECUTION_KINDS, RUN_STATUSES, find_execution, list_runs
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now

__all__ = ["RunPagesController"]

_WINDOWS = {"day": timedelta(days=1), "week": timedelta(days=7)}
MAX_ID_CHARS = 128  # longer than any id the platform gives; a longer search is no id


class RunPagesController(Controller):
    path = "/runs"

    @get("/", opt=console_access(Role.VIEWER))
    async def runs(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        agent: FromQuery[str | None] = None,
        status: FromQuery[str | None] = None,
        since: FromQuery[str | None] = None,
        kind: FromQuery[str | None] = None,
        q: FromQuery[str | None] = None,
    ) -> Response[Any]:
        """The list, filtered; with ``q`` (a pasted id) the trace of that execution, or the list saying none has it."""
        scope = console_user(request).scope
        wanted = (q or "").strip()
        known = wanted and len(wanted) <= MAX_ID_CHARS
        if known and await find_execution(db_session, scope=scope, execution_id=wanted) is not None:
            return Redirect(f"{CONSOLE_PREFIX}/runs/{quote(wanted, safe='')}", status_code=303)
        now = utc_now()
        start = now - _WINDOWS[since] if since in _WINDOWS else month_start(now) if since == "month" else None
        agents = await list_agents(
            db_session, scope=scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
        )
        chosen_kind = kind if kind in EXECUTION_KINDS else "agents"
        rows = await list_runs(
            db_session,
            scope=scope,
            kind=chosen_kind,
            agent_id=agent or None,
            status=status if status in RUN_STATUSES else None,
            since=start,
        )
        return render(
            request,
            "runs.html",
            status_code=404 if wanted else 200,
            runs=rows,
            agents=agents.data,
            statuses=RUN_STATUSES,
            kinds=EXECUTION_KINDS,
            missing=wanted,
            chosen={"agent": agent or "", "status": status or "", "since": since or "", "kind": chosen_kind},
        )

    @get("/{run_id:str}", opt=console_access(Role.VIEWER))
    async def trace(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        """The trace of a run (``run_…``), a stored response (``resp_…``) or a chat completion (``chatcmpl-…``)."""
        scope = console_user(request).scope
        found = await find_execution(db_session, scope=scope, execution_id=run_id)
        if found == "run":
            return render(request, "trace.html", **await run_trace(db_session, scope=scope, run_id=run_id))
        if found == "response":
            return render(request, "trace.html", **await response_trace(db_session, scope=scope, response_id=run_id))
        if found == "chat":
            return render(request, "chat_trace.html", **await chat_trace(db_session, scope=scope, completion_id=run_id))
        raise NotFound(f"no run, response or chat completion {run_id!r}", param="run_id")
