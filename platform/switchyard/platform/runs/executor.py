"""Executing a run on a worker: claim it (a lease), drive the run loop, checkpoint every transition.

Called by the Celery task ``runs.execute`` (and in-process by the inline dispatcher). Safe to call any number
of times for one run: a run that is finished or waits for the client is left alone, a run leased by another
live worker or put aside is skipped, and a worker killed mid-run leaves the last checkpoint for the next one
(see ``docs/agents.md``, "Durability"). In a worker, a model call that must wait for admission puts the run
aside (``lease.postpone``) and raises :class:`AdmissionDeferred` for the worker to send it again for then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlmodel import col

from switchyard.agents import (
    TERMINAL_STATUSES,
    AgentSpec,
    Model,
    RunLoop,
    RunState,
    RunStatus,
    ToolRegistry,
    build_tools,
    drive_run,
)
from switchyard.agents.pool_model import PoolModel, pool_token_counter
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import ModelNotFound, model_backend
from switchyard.platform.db import TenantScope
from switchyard.platform.models import AgentVersion, Run, ThreadMessage, utc_now
from switchyard.platform.observability.instrument import traced_run, traced_tools
from switchyard.platform.runs.admitted import AdmissionDeferred, AdmittedModel, time_limit_of
from switchyard.platform.runs.deltas import MessageDeltas
from switchyard.platform.runs.environment import RunEnvironment
from switchyard.platform.runs.lease import cancel_flag, heartbeat, holder, postpone, release, take
from switchyard.platform.runs.persist import RunContext, StaleRun, client_loop, save_transition
from switchyard.platform.runs.stop_on_cancel import StopsOnCancel
from switchyard.platform.runs.turns import take_turn
from switchyard.platform.threads.service import history

__all__ = ["execute_run"]

log = logging.getLogger(__name__)


def _billed_steps(state: RunState) -> int:
    return sum(1 for step in state.steps if step.usage is not None)


async def _claim(env: RunEnvironment, scope: TenantScope, run_id: str, owner: str) -> tuple[Run, AgentVersion] | str:
    """Take the run's lease for ``owner``; or say why not (finished, awaiting the client, leased, behind a run)."""
    now = utc_now()
    async with env.database.unit_of_work(scope) as session:
        run = (
            await session.execute(select(Run).where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id))
        ).scalar_one_or_none()
        if run is None:
            return "missing"
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
        values: dict[str, Any] = {
            "lease_expires_at": now + timedelta(seconds=env.lease_s),
            "attempts": col(Run.attempts) + 1,
        }
        if run.history_position < 0:
            last = (
                await session.execute(
                    select(func.max(col(ThreadMessage.position))).where(
                        col(ThreadMessage.tenant_id) == scope.tenant_id, col(ThreadMessage.thread_id) == run.thread_id
                    )
                )
            ).scalar_one_or_none()
            values["history_position"] = -1 if last is None else int(last)
        if not await take(session, scope, Run, run, owner, values):
            return "leased"
        if env.worker:
            await take_turn(session, scope)
        version = (
            await session.execute(
                select(AgentVersion).where(
                    col(AgentVersion.tenant_id) == scope.tenant_id,
                    col(AgentVersion.agent_id) == run.agent_id,
                    col(AgentVersion.version) == run.agent_version,
                )
            )
        ).scalar_one()
        return run, version


@traced_run  # a span, the run id in logs, the outcome counted
async def execute_run(env: RunEnvironment, *, tenant_id: str, run_id: str) -> str:
    """Advance the run as far as it goes (a final status or ``requires_action``); returns what happened."""
    scope = TenantScope(tenant_id)
    owner = holder(env.worker_id)
    claimed = await _claim(env, scope, run_id, owner)
    if isinstance(claimed, str):
        return claimed
    run, version = claimed
    beating = heartbeat(env.database, scope, Run, run_id, owner, env.lease_s)
    heartbeat_task = asyncio.get_running_loop().create_task(beating)
    deferred: AdmissionDeferred | None = None
    try:
        outcome = await _drive(env, scope, run, version, owner)
    except StaleRun as exc:
        log.info("run %s: %s", run_id, exc)
        return "stale"
    except AdmissionDeferred as exc:
        deferred = exc
        raise
    finally:
        heartbeat_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat_task
        if deferred is not None:
            await postpone(env.database, scope, Run, run_id, owner, deferred.until)
        else:
            await release(env.database, scope, Run, run_id, owner)
    if outcome in {s.value for s in TERMINAL_STATUSES} and env.dispatch is not None:
        next_run = await _next_queued(env, scope, run.thread_id)
        if next_run is not None:
            env.dispatch(tenant_id, next_run)
    return outcome


async def _next_queued(env: RunEnvironment, scope: TenantScope, thread_id: str) -> str | None:
    async with env.database.unit_of_work(scope) as session:
        statement = (
            select(col(Run.id))
            .where(col(Run.tenant_id) == scope.tenant_id, col(Run.thread_id) == thread_id, col(Run.status) == "queued")
            .order_by(col(Run.id))
            .limit(1)
        )
        return (await session.execute(statement)).scalar_one_or_none()


async def _drive(env: RunEnvironment, scope: TenantScope, run: Run, version: AgentVersion, owner: str) -> str:
    spec = AgentSpec.model_validate(version.definition)
    state = RunState.model_validate(run.state)
    instance_type = "unknown"
    failure: tuple[str, str] | None = None
    try:
        backend = model_backend(env.pool, spec.model, scope.tenant_id)
        instance_type = backend.spec.instance
        # an alias is billed under the served name, as chat completions and responses bill it: one model in the books
        spec = spec.model_copy(update={"model": backend.name})
    except ModelNotFound as exc:
        failure = ("model_not_found", exc.message)
    ctx = RunContext(
        run_id=run.id,
        thread_id=run.thread_id,
        agent_id=run.agent_id,
        agent_version=run.agent_version,
        api_key_id=run.api_key_id,
        instance_type=instance_type,
    )
    current = state
    deltas = MessageDeltas(env.database, scope, ctx)
    reservations: dict[str, str] = {}

    async def checkpoint(new: RunState) -> None:
        nonlocal current
        async with deltas.lock:
            await deltas.write_pending()  # a model call's streamed text comes before its message
            async with env.database.unit_of_work(scope) as session:
                await save_transition(
                    session,
                    scope=scope,
                    ctx=ctx,
                    before=current,
                    after=new,
                    lease_owner=owner,
                    lease_s=env.lease_s,
                    reservations=reservations,
                    announced=deltas.announced,
                )
        if env.usage_committed is not None and _billed_steps(new) > _billed_steps(current):
            env.usage_committed()
        current = new
        deltas.follow(new)

    tools = ToolRegistry()
    if failure is None:
        try:
            tools = traced_tools(await build_tools(spec, **env.tool_options))
        except Exception as exc:  # an MCP server that cannot be listed fails the run, with the reason
            failure = ("tool_setup_error", f"{type(exc).__name__}: {exc}")
    if failure is not None:
        failed = client_loop(spec).fail(state, code=failure[0], message=failure[1], now_ms=wall_clock_ms())
        await checkpoint(failed)
        return failed.status.value
    loop = RunLoop(
        spec,
        tools,
        context_window_tokens=backend.context_window,
        token_counter=pool_token_counter,
        reserved_output_tokens=1024,
    )
    async with env.database.unit_of_work(scope) as session:
        thread = await history(session, scope=scope, thread_id=run.thread_id, up_to_position=run.history_position)

    cancel_requested = cancel_flag(env.database, scope, Run, run.id)

    inner: Model = (
        env.model_factory(scope.tenant_id, run.thread_id)
        if env.model_factory is not None
        else PoolModel(env.pool, tenant=scope.tenant_id, session=run.thread_id, on_event=deltas.on_event)
    )
    inner = StopsOnCancel(inner, cancel_requested=cancel_requested, stop=backend.cancel)  # a cancel stops the call
    model = AdmittedModel(
        inner,
        admission=env.admission,
        scope=scope,
        backend=backend,
        api_key_id=run.api_key_id,
        agent_id=run.agent_id,
        reservations=reservations,
        rates_charged=_billed_steps(state) == 0,  # charged when the run was created
        defer=env.worker,
        waiting_since=run.updated_at,
    )
    try:
        final, _action = await drive_run(
            loop,
            state,
            thread=thread,
            model=model,
            checkpoint=checkpoint,
            tenant_id=scope.tenant_id,
            cancel_requested=cancel_requested,
        )
    except AdmissionDeferred as deferred:
        raise deferred.capped(time_limit_of(spec, current)) from None
    finally:
        await deltas.close()
    return final.status.value
