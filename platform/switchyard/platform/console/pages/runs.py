"""Runs: a filtered list across threads, and a run's trace (queue, model calls and tool calls on a timeline)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from litestar import Controller, Request, Response, get
from litestar.params import FromPath, FromQuery

from switchyard.agents import StepType
from switchyard.platform.agent_registry.service import list_agents
from switchyard.platform.auth.roles import Role
from switchyard.platform.billing.periods import month_start
from switchyard.platform.console.edge import console_access, console_user
from switchyard.platform.console.queries import RUN_STATUSES, list_runs, thread_of_run
from switchyard.platform.console.render import render
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams
from switchyard.platform.models import utc_now
from switchyard.platform.runs.schemas import RunPublic, StepPublic
from switchyard.platform.runs.service import get_run, list_steps

__all__ = ["RunPagesController", "TraceBar", "trace_bars"]

_WINDOWS = {"day": timedelta(days=1), "week": timedelta(days=7)}


@dataclass(frozen=True, slots=True)
class TraceBar:
    """One bar of the trace's timeline, in per-mille of the run's span (drawn as SVG: no inline styles)."""

    label: str
    kind: str  # queue, model_call or tool_call
    x: float
    width: float
    start_ms: int
    duration_ms: int
    step: StepPublic | None = None


def _ms(later: datetime, earlier: datetime) -> int:
    return max(0, int((later - earlier).total_seconds() * 1000))


def trace_bars(run: RunPublic, steps: list[StepPublic]) -> list[TraceBar]:
    """The queue wait (creation to start) and every step, placed on one time axis from the run's creation."""
    spans: list[tuple[str, str, int, int, StepPublic | None]] = []
    if run.started_at is not None:
        spans.append(("queue", "queue", 0, _ms(run.started_at, run.created_at), None))
    for step in steps:
        start = _ms(step.created_at, run.created_at)
        end = _ms(step.completed_at, run.created_at) if step.completed_at else start + (step.duration_ms or 0)
        name = step.step_details.get("model") if step.type == StepType.MODEL_CALL else None
        if step.type != StepType.MODEL_CALL:
            call = step.step_details.get("tool_call") or {}
            name = (call.get("function") or {}).get("name") or step.step_details.get("tool_kind")
        kind = str(step.type.value if hasattr(step.type, "value") else step.type)
        spans.append((f"{step.index}. {name or kind}", kind, start, max(end - start, 0), step))
    total = max([start + length for _, _, start, length, _ in spans] + [1])
    return [
        TraceBar(label, kind, 1000 * start / total, max(1000 * length / total, 2.0), start, length, step)
        for label, kind, start, length, step in spans
    ]


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
    ) -> Response[str]:
        scope = console_user(request).scope
        now = utc_now()
        start = now - _WINDOWS[since] if since in _WINDOWS else month_start(now) if since == "month" else None
        agents = await list_agents(
            db_session, scope=scope, params=CursorParams(limit=100, after=None, before=None, order="desc")
        )
        rows = await list_runs(
            db_session,
            scope=scope,
            agent_id=agent or None,
            status=status if status in RUN_STATUSES else None,
            since=start,
        )
        return render(
            request,
            "runs.html",
            runs=rows,
            agents=agents.data,
            statuses=RUN_STATUSES,
            chosen={"agent": agent or "", "status": status or "", "since": since or ""},
        )

    @get("/{run_id:str}", opt=console_access(Role.VIEWER))
    async def trace(
        self, request: Request[Any, Any, Any], db_session: DbSession, run_id: FromPath[str]
    ) -> Response[str]:
        scope = console_user(request).scope
        thread_id = await thread_of_run(db_session, scope=scope, run_id=run_id)
        if thread_id is None:
            raise NotFound(f"no run {run_id!r}", param="run_id")
        run = await get_run(db_session, scope=scope, thread_id=thread_id, run_id=run_id)
        steps = await list_steps(
            db_session,
            scope=scope,
            thread_id=thread_id,
            run_id=run_id,
            params=CursorParams(limit=100, after=None, before=None, order="asc"),
        )
        return render(request, "trace.html", run=run, steps=steps.data, bars=trace_bars(run, steps.data))
