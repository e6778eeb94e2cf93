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
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import Backend, PoolEvent
from switchyard.agents import AgentSpec, Message, Model, ModelRequest, ModelResponse, RunLoop, RunState
from switchyard.agents.pool_model import PoolModel, pool_token_counter
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import Holds
from switchyard.platform.db import TenantScope
from switchyard.platform.execution.admitted import AdmissionDeferred, AdmittedModel, FirstCall, time_limit_of
from switchyard.platform.execution.cast import Cast, CastError, resolve_cast
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.lease import cancel_flag, heartbeat, holder, postpone, release, take
from switchyard.platform.execution.outages import WaitsOutOutages
from switchyard.platform.execution.steps import StaleRun, client_loop
from switchyard.platform.execution.stop_on_cancel import StopsOnCancel
from switchyard.platform.execution.turns import take_turn
from switchyard.platform.models import utc_now
from switchyard.platform.observability.agent_spans import drive_traced

__all__ = ["FrontEnd", "Job", "execute"]

log = logging.getLogger(__name__)


class Job(Protocol):
    """One claimed run or response, as its front end drives it."""

    spec: AgentSpec
    state: RunState
    """Where the job stands: the last state checkpointed (the kernel starts the loop from it)."""
    session_key: str
    """The accelerator pool's session hint (a run's thread, a response's ``fleet_session``): keeps the job's model
    calls on one replica, where their KV cache may be reused, while no replica caches their prompt yet."""
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

    def start(self, cast: Cast | None) -> None:
        """The agents, their models and tools were resolved (``None`` when they could not be)."""

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
    cast: Cast | None = None
    try:
        cast = await resolve_cast(env, scope, job.spec, job.state, api_key_id=job.api_key_id)
    except CastError as exc:
        failure = exc
    job.start(cast)
    try:
        if cast is None:
            if admitted is not None:  # what the job's creation took for its first call: no call is made
                await env.admission.finish(admitted, billed=False)
            now_ms = wall_clock_ms()
            failed = client_loop(job.spec).fail(job.state, code=failure.code, message=failure.message, now_ms=now_ms)
            await job.checkpoint(failed)
            return job.outcome(failed)
        return await _drive_loop(env, front, scope, job_id, job, cast, admitted)
    finally:
        await job.close()


async def _drive_loop(
    env: RunEnvironment, front: FrontEnd, scope: TenantScope, job_id: str, job: Job, cast: Cast, admitted: Holds | None
) -> str:
    spec = cast.spec
    loop = RunLoop(
        spec,
        cast.tools,
        context_window_tokens=cast.backend.context_window,
        token_counter=pool_token_counter,
        reserved_output_tokens=1024,
        call_options=job.call_options,
        members=cast.members,
    )
    thread = await job.history()
    cancel_requested = cancel_flag(env.database, scope, front.table, job_id) if job.cancellable else None
    state = job.state
    # the first model call was admitted when the job was created (its holds, or the create's charge to its rates):
    # whichever of the job's agents makes it (a workflow's own agent never does: a node's agent does) uses that
    first_call = FirstCall(admitted, rates_charged=not any(step.usage is not None for step in state.steps))
    workflow_id = job.agent_id if spec.workflow is not None else None  # a workflow runs as its own agent

    def model_for(backend: Backend, agent_id: str | None) -> AdmittedModel:
        inner: Model = (
            env.model_factory(scope.tenant_id, job.session_key)
            if env.model_factory is not None
            else PoolModel(env.pool, tenant=scope.tenant_id, session=job.session_key, on_event=job.on_event)
        )
        # a backend briefly away: a worker's job put aside and resumed goes on waiting from its last progress; a
        # job this process keeps (a foreground response, an inline run) waits from its first refused call
        since = job.waiting_since if env.worker else None
        inner = WaitsOutOutages(inner, defer=env.worker, waiting_since=since)
        if cancel_requested is not None:  # a cancel stops the model call at the fleet, not only the next step
            inner = StopsOnCancel(inner, cancel_requested=cancel_requested, stop=backend.cancel)
        return AdmittedModel(
            inner,
            admission=env.admission,
            scope=scope,
            backend=backend,
            api_key_id=job.api_key_id,
            agent_id=agent_id,
            reservations=job.reservations,
            first=first_call,
            workflow_id=workflow_id,
            defer=env.worker,
            waiting_since=job.waiting_since,
        )

    own = model_for(cast.backend, job.agent_id)
    members = {agent_id: model_for(b, agent_id) for agent_id, b in cast.backends.items()}
    try:
        final, _action = await drive_traced(  # a span per agent acting, and per workflow node
            loop,
            state,
            agent_id=job.agent_id,
            thread=thread,
            model=_ByAgent(own, members),
            checkpoint=job.checkpoint,
            tenant_id=scope.tenant_id,
            cancel_requested=cancel_requested,
        )
    except AdmissionDeferred as deferred:
        raise deferred.capped(time_limit_of(spec, job.state)) from None
    finally:
        await first_call.give_back(env.admission)  # no model call took it (an input guardrail tripped first)
    return job.outcome(final)


class _ByAgent:
    """The model of the agent acting in a request: the job's own, or a member's after a handoff (its own backend,
    admitted and budgeted as that agent)."""

    def __init__(self, own: Model, members: Mapping[str, Model]) -> None:
        self.own = own
        self.members = members

    async def request(self, request: ModelRequest) -> ModelResponse:
        model = self.members.get(request.agent, self.own) if request.agent is not None else self.own
        return await model.request(request)
