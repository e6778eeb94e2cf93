"""Runs as a front end of the execution kernel (``execution/kernel.py``): when a run may be driven, its agent
version and thread, and how a transition is stored (``runs/persist.py``) and streamed (``runs/deltas.py``).

Called by the Celery task ``runs.execute`` (and in-process by the inline dispatcher). Safe to call any number
of times for one run: a run that is finished or waits for the client is left alone, a run leased by another
live worker or put aside is skipped, and a worker killed mid-run leaves the last checkpoint for the next one
(see ``docs/agents.md``, "Durability").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import PoolEvent
from switchyard.agents import TERMINAL_STATUSES, AgentSpec, Message, RunState, RunStatus
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.cast import Cast
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.kernel import execute
from switchyard.platform.models import AgentVersion, Run, ThreadMessage
from switchyard.platform.observability.instrument import traced_run
from switchyard.platform.runs.deltas import MessageDeltas
from switchyard.platform.runs.dispatch import EXECUTE_TASK
from switchyard.platform.runs.persist import RunContext, save_transition
from switchyard.platform.threads.service import history

__all__ = ["execute_run"]

log = logging.getLogger(__name__)


def _billed_steps(state: RunState) -> int:
    return sum(1 for step in state.steps if step.usage is not None)


class _Runs:
    """The kernel's front end for runs: claims a run unless it is finished, waits for the client, or queues
    behind an earlier run of its thread."""

    table = Run

    async def claimable(self, session: AsyncSession, scope: TenantScope, row: Any) -> str | dict[str, Any]:
        run: Run = row
        state = RunState.model_validate(run.state)
        if state.status in TERMINAL_STATUSES:
            return "finished"
        if state.status is RunStatus.REQUIRES_ACTION and not run.cancel_requested:
            action = state.required_action
            if action is None or action.expires_at_ms > wall_clock_ms():
                return "awaiting_client"
        earlier = (
            await session.execute(
                select(col(Run.id))
                .where(
                    col(Run.tenant_id) == scope.tenant_id,
                    col(Run.thread_id) == run.thread_id,
                    col(Run.id) < run.id,
                    col(Run.status).in_(("queued", "in_progress", "requires_action")),
                )
                .limit(1)
            )
        ).scalar_one_or_none()
        if earlier is not None:
            return "behind_another_run"
        values: dict[str, Any] = {"attempts": col(Run.attempts) + 1}
        if run.history_position < 0:  # the thread's messages up to now are the run's history
            last = (
                await session.execute(
                    select(func.max(col(ThreadMessage.position))).where(
                        col(ThreadMessage.tenant_id) == scope.tenant_id, col(ThreadMessage.thread_id) == run.thread_id
                    )
                )
            ).scalar_one_or_none()
            values["history_position"] = -1 if last is None else int(last)
        return values

    async def open(self, env: RunEnvironment, session: AsyncSession, scope: TenantScope, row: Any) -> _RunJob:
        run: Run = row
        version = (
            await session.execute(
                select(AgentVersion).where(
                    col(AgentVersion.tenant_id) == scope.tenant_id,
                    col(AgentVersion.agent_id) == run.agent_id,
                    col(AgentVersion.version) == run.agent_version,
                )
            )
        ).scalar_one()
        return _RunJob(env, scope, run, AgentSpec.model_validate(version.definition))


class _RunJob:
    """A claimed run: its transitions go to the run's row, events, thread messages and usage."""

    cancellable = True

    def __init__(self, env: RunEnvironment, scope: TenantScope, run: Run, spec: AgentSpec) -> None:
        self.env = env
        self.scope = scope
        self.run = run
        self.owner = run.lease_owner
        self.spec = spec
        self.state = RunState.model_validate(run.state)
        self.session_key = run.thread_id
        self.api_key_id: str | None = run.api_key_id
        self.agent_id: str | None = run.agent_id
        self.waiting_since: datetime = run.updated_at
        self.call_options: dict[str, Any] = {}
        self.reservations: dict[str, str] = {}
        self.ctx = self._context("unknown")
        self.deltas = MessageDeltas(env.database, scope, self.ctx)

    def _context(self, instance_type: str, instance_types: Mapping[str, str] | None = None) -> RunContext:
        run = self.run
        known = (run.id, run.thread_id, run.agent_id, run.agent_version, run.api_key_id)
        return RunContext(*known, instance_type, instance_types or {})

    def start(self, cast: Cast | None) -> None:
        if cast is not None:
            self.ctx = self._context(cast.backend.spec.instance, cast.instance_types())
            self.deltas.ctx = self.ctx

    async def history(self) -> list[Message]:
        async with self.env.database.unit_of_work(self.scope) as session:
            return await history(
                session, scope=self.scope, thread_id=self.run.thread_id, up_to_position=self.run.history_position
            )

    async def checkpoint(self, new: RunState) -> None:
        env, deltas, current = self.env, self.deltas, self.state
        async with deltas.lock:
            await deltas.write_pending()  # a model call's streamed text comes before its message
            async with env.database.unit_of_work(self.scope) as session:
                await save_transition(
                    session,
                    scope=self.scope,
                    ctx=self.ctx,
                    before=current,
                    after=new,
                    lease_owner=self.owner,
                    lease_s=env.lease_s,
                    reservations=self.reservations,
                    announced=deltas.announced,
                )
        if env.usage_committed is not None and _billed_steps(new) > _billed_steps(current):
            env.usage_committed()
        self.state = new
        deltas.follow(new)

    def on_event(self, event: PoolEvent) -> None:
        self.deltas.on_event(event)

    def outcome(self, final: RunState) -> str:
        return final.status.value

    async def close(self) -> None:
        await self.deltas.close()


@traced_run  # a span, the run id in logs, the outcome counted
async def execute_run(env: RunEnvironment, *, tenant_id: str, run_id: str) -> str:
    """Advance the run as far as it goes (a final status or ``requires_action``); returns what happened. When it
    ends, the next run queued on its thread is sent."""
    runs = _Runs()
    outcome = await execute(env, runs, tenant_id=tenant_id, job_id=run_id)
    if outcome in {s.value for s in TERMINAL_STATUSES} and env.send_job is not None:
        next_run = await _next_queued(env, TenantScope(tenant_id), run_id)
        if next_run is not None:
            env.send_job(EXECUTE_TASK, (tenant_id, next_run))
    return outcome


async def _next_queued(env: RunEnvironment, scope: TenantScope, run_id: str) -> str | None:
    """The first queued run of ``run_id``'s thread."""
    async with env.database.unit_of_work(scope) as session:
        thread_id = select(col(Run.thread_id)).where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id)
        statement = (
            select(col(Run.id))
            .where(
                col(Run.tenant_id) == scope.tenant_id,
                col(Run.thread_id) == thread_id.scalar_subquery(),
                col(Run.status) == "queued",
            )
            .order_by(col(Run.id))
            .limit(1)
        )
        return (await session.execute(statement)).scalar_one_or_none()
