"""The one way an agent loop is executed, whatever asked for it: claim the job (a lease), keep the lease alive,
resolve the model, build the tools, admit every model call, wait out a model backend that is briefly away, drive
the loop, checkpoint each transition, and release the lease (or put the job aside when a call must wait).

A front end (runs, responses) says what its job is through :class:`FrontEnd`: which table holds it, when it may
be driven, and a :class:`Job` that knows its agent, its history, how a transition is stored and streamed, and
what its outcome is called. The kernel does the rest, identically for each, so a fix made here holds for both.

Safe to call any number of times for one job: one finished, waiting for the client, or leased by another live
process is left alone, and a process killed mid-job leaves the last checkpoint for the next one. In a worker, a
model call that must wait for admission puts the job aside (``lease.postpone``) and raises
:class:`AdmissionDeferred` for the worker to send the job again for then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import Backend, PoolEvent
from switchyard.agents import AgentSpec, Message, Model, RunLoop, RunState, ToolRegistry, build_tools, drive_run
from switchyard.agents.pool_model import PoolModel, pool_token_counter
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import Holds, ModelNotFound, model_backend
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.admitted import AdmissionDeferred, AdmittedModel, time_limit_of
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.lease import cancel_flag, heartbeat, holder, postpone, release, take
from switchyard.platform.execution.outages import WaitsOutOutages
from switchyard.platform.execution.steps import StaleRun, client_loop
from switchyard.platform.execution.stop_on_cancel import StopsOnCancel
from switchyard.platform.execution.turns import take_turn
from switchyard.platform.models import utc_now
from switchyard.platform.observability.instrument import traced_tools

__all__ = ["FrontEnd", "Job", "execute"]

log = logging.getLogger(__name__)


class Job(Protocol):
    """One claimed run or response, as its front end drives it."""

    spec: AgentSpec
    state: RunState
    """Where the job stands: the last state checkpointed (the kernel starts the loop from it)."""
    session_key: str
    """The accelerator pool's session (a thread's id, a response's): where a model call's KV cache may be reused."""
    api_key_id: str | None
    agent_id: str | None
    waiting_since: datetime
    """When the job last changed: a model call that must wait is waiting since then."""
    call_options: dict[str, Any]
    """Further model-call options the client chose (sampling, formats)."""
    reservations: dict[str, str]
    """Step id → the budget hold of its model call, settled by the checkpoint that bills the step."""
    cancellable: bool
    """A cancel request stops the job's model call at the fleet and the loop at its next step."""

    def start(self, backend: Backend | None, tools: ToolRegistry) -> None:
        """The model and tools were resolved (``backend`` is None when the model is unknown)."""

    async def history(self) -> list[Message]:
        """The messages before the job's own: a thread's, a conversation's, a chain of responses'."""

    async def checkpoint(self, new: RunState) -> None:
        """Store ``new`` (one transaction, with its usage, events and side records) and stream it; raise
        ``StaleRun`` when the job changed under this process."""

    def on_event(self, event: PoolEvent) -> None:
        """A model call's token, as it is generated."""

    def outcome(self, final: RunState) -> str:
        """What ``execute`` answers once the loop stops at ``final``."""

    async def close(self) -> None:
        """The drive stopped (however it stopped): flush what is still pending."""


class FrontEnd(Protocol):
    """What the kernel asks of a front end to claim and open one of its jobs."""

    table: Any
    """The table of its jobs: a row has ``tenant_id``, ``id``, ``revision``, ``lease_owner``, ``lease_expires_at``
    and ``cancel_requested``."""

    async def claimable(self, session: AsyncSession, scope: TenantScope, row: Any) -> str | dict[str, Any]:
        """Why ``row`` is not to be driven now (``"finished"``, ``"awaiting_client"``, …), or the values its claim
        writes beside the lease."""

    async def open(self, env: RunEnvironment, session: AsyncSession, scope: TenantScope, row: Any) -> Job:
        """The job of the claimed ``row`` (in the claim's transaction)."""


async def execute(
    env: RunEnvironment, front: FrontEnd, *, tenant_id: str, job_id: str, admitted: Holds | None = None
) -> str:
    """Claim the job and drive it as far as it goes; returns its outcome, or why it was not driven here.

    ``admitted`` holds the first model call's admission, taken before the job was stored (given back unused when
    the job is not driven here)."""
    scope = TenantScope(tenant_id)
    owner = holder(env.worker_id)
    claimed = await _claim(env, front, scope, job_id, owner)
    if isinstance(claimed, str):
        if admitted is not None:
            await env.admission.finish(admitted, billed=False)
        return claimed
    beating = heartbeat(env.database, scope, front.table, job_id, owner, env.lease_s)
    heartbeat_task = asyncio.get_running_loop().create_task(beating)
    deferred: AdmissionDeferred | None = None
    try:
        return await _drive(env, front, scope, job_id, claimed, admitted)
    except StaleRun as exc:
        log.info("%s: %s", job_id, exc)
        return "stale"
    except AdmissionDeferred as exc:
        deferred = exc
        raise
    finally:
        heartbeat_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat_task
        if deferred is not None:
            await postpone(env.database, scope, front.table, job_id, owner, deferred.until)
        else:
            await release(env.database, scope, front.table, job_id, owner)


async def _claim(env: RunEnvironment, front: FrontEnd, scope: TenantScope, job_id: str, owner: str) -> Job | str:
    """Take the job's lease for ``owner`` and open it; or say why not (missing, finished, leased, …)."""
    table = front.table
    now = utc_now()
    async with env.database.unit_of_work(scope) as session:
        row = (
            await session.execute(select(table).where(col(table.tenant_id) == scope.tenant_id, col(table.id) == job_id))
        ).scalar_one_or_none()
        if row is None:
            return "missing"
        values = await front.claimable(session, scope, row)
        if isinstance(values, str):
            return values
        values["lease_expires_at"] = now + timedelta(seconds=env.lease_s)
        if not await take(session, scope, table, row, owner, values):
            return "leased"
        if env.worker:
            await take_turn(session, scope)
        return await front.open(env, session, scope, row)


async def _drive(
    env: RunEnvironment, front: FrontEnd, scope: TenantScope, job_id: str, job: Job, admitted: Holds | None
) -> str:
    spec = job.spec
    backend: Backend | None = None
    failure: tuple[str, str] | None = None
    try:
        backend = model_backend(env.pool, spec.model, scope.tenant_id)
        # an alias is billed under the served name, as chat completions bill it: one model in the books
        spec = spec.model_copy(update={"model": backend.name})
    except ModelNotFound as exc:
        failure = ("model_not_found", exc.message)
    tools = ToolRegistry()
    if failure is None:
        try:
            tools = traced_tools(await build_tools(spec, **env.tool_options))
        except Exception as exc:  # an MCP server that cannot be listed fails the job, with the reason
            failure = ("tool_setup_error", f"{type(exc).__name__}: {exc}")
    job.start(backend, tools)
    try:
        if failure is not None:
            failed = client_loop(spec).fail(job.state, code=failure[0], message=failure[1], now_ms=wall_clock_ms())
            await job.checkpoint(failed)
            return job.outcome(failed)
        assert backend is not None  # resolved, since nothing failed
        return await _drive_loop(env, front, scope, job_id, job, spec, backend, tools, admitted)
    finally:
        await job.close()


async def _drive_loop(
    env: RunEnvironment,
    front: FrontEnd,
    scope: TenantScope,
    job_id: str,
    job: Job,
    spec: AgentSpec,
    backend: Backend,
    tools: ToolRegistry,
    admitted: Holds | None,
) -> str:
    loop = RunLoop(
        spec,
        tools,
        context_window_tokens=backend.context_window,
        token_counter=pool_token_counter,
        reserved_output_tokens=1024,
        call_options=job.call_options,
    )
    thread = await job.history()
    cancel_requested = cancel_flag(env.database, scope, front.table, job_id) if job.cancellable else None
    inner: Model = (
        env.model_factory(scope.tenant_id, job.session_key)
        if env.model_factory is not None
        else PoolModel(env.pool, tenant=scope.tenant_id, session=job.session_key, on_event=job.on_event)
    )
    # a backend briefly away: a worker's job put aside and resumed goes on waiting from its last progress; a job
    # this process keeps (a foreground response, an inline run) waits from its first refused call
    since = job.waiting_since if env.worker else None
    inner = WaitsOutOutages(inner, defer=env.worker, waiting_since=since)
    if cancel_requested is not None:  # a cancel stops the model call at the fleet, not only the next step
        inner = StopsOnCancel(inner, cancel_requested=cancel_requested, stop=backend.cancel)
    state = job.state
    model = AdmittedModel(
        inner,
        admission=env.admission,
        scope=scope,
        backend=backend,
        api_key_id=job.api_key_id,
        agent_id=job.agent_id,
        reservations=job.reservations,
        admitted=admitted,
        # the first call's rates were charged when the job was created (its admission, or the create's check)
        rates_charged=admitted is None and not any(step.usage is not None for step in state.steps),
        defer=env.worker,
        waiting_since=job.waiting_since,
    )
    try:
        final, _action = await drive_run(
            loop,
            state,
            thread=thread,
            model=model,
            checkpoint=job.checkpoint,
            tenant_id=scope.tenant_id,
            cancel_requested=cancel_requested,
        )
    except AdmissionDeferred as deferred:
        raise deferred.capped(time_limit_of(spec, job.state)) from None
    return job.outcome(final)
