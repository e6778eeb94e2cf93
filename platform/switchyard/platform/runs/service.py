"""Runs from the API's side: create, read, steps, cancel, tool outputs and approvals (client transitions).

A run is admitted when it is created: its first model call (the thread's messages and the agent's instructions,
and the most output the agent may ask for) takes its API key's request rate and its tenant's token rate, and is
checked against the tenant's request slots and budgets, as a chat completion is (429, 402), before anything is
stored. Its worker then takes only the slot and the budget hold for that call (the rates stay charged).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import count_prompt_tokens_off_loop
from switchyard.agents import TERMINAL_STATUSES, AgentSpec, RunState, RunStatus, ToolOutputsError
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import Admission, ModelCall, most_output_tokens
from switchyard.platform.agent_registry.service import ModelCheck, get_version
from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.execution.steps import StaleRun, client_loop
from switchyard.platform.http.errors import Conflict, InvalidRequest, NotFound
from switchyard.platform.http.pagination import CursorParams, Page, paginate, unknown_cursor
from switchyard.platform.jobs import JobSender, enqueue
from switchyard.platform.models import AgentVersion, Run, ThreadMessage, utc_now
from switchyard.platform.runs.dispatch import EXECUTE_TASK
from switchyard.platform.runs.persist import RunContext, initial_events, save_transition
from switchyard.platform.runs.schemas import (
    RunCreate,
    RunPublic,
    StepPublic,
    SubmitApprovals,
    SubmitToolOutputs,
)
from switchyard.platform.threads.schemas import MessageCreate
from switchyard.platform.threads.service import active_run_id, history, thread_row

__all__ = [
    "admit_run",
    "cancel_run",
    "create_run",
    "get_run",
    "list_runs",
    "list_steps",
    "run_row",
    "submit_approvals",
    "submit_tool_outputs",
]


async def run_row(session: AsyncSession, scope: TenantScope, thread_id: str, run_id: str) -> Run:
    statement = select(Run).where(
        col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id, col(Run.thread_id) == thread_id
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no run {run_id!r} in thread {thread_id!r}", param="run_id")
    return row


def _context(run: Run) -> RunContext:
    return RunContext(
        run_id=run.id,
        thread_id=run.thread_id,
        agent_id=run.agent_id,
        agent_version=run.agent_version,
        api_key_id=run.api_key_id,
        instance_type="unknown",  # client transitions never complete a model step
    )


async def _spec(session: AsyncSession, scope: TenantScope, run: Run) -> AgentSpec:
    statement = select(AgentVersion).where(
        col(AgentVersion.tenant_id) == scope.tenant_id,
        col(AgentVersion.agent_id) == run.agent_id,
        col(AgentVersion.version) == run.agent_version,
    )
    return AgentSpec.model_validate((await session.execute(statement)).scalar_one().definition)


async def create_run(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    thread_id: str,
    data: RunCreate,
    check_model: ModelCheck,
    jobs: JobSender,
    admission: Admission | None,
) -> Run:
    """A queued run of the agent over the thread, sent to the workers after the commit; its first model call
    admitted first (``admission``: see :func:`admit_run`; ``None`` when the caller admitted it, before it wrote
    the thread or a message)."""
    await thread_row(session, scope, thread_id)
    agent, version = await get_version(session, scope=scope, agent_id=data.agent_id, version=data.agent_version)
    spec = AgentSpec.model_validate(version.definition)
    check_model(spec.model)
    active = await active_run_id(session, scope, thread_id)
    if active is not None and data.multitask_strategy == "reject":
        raise Conflict(
            f"thread {thread_id!r} has an active run {active!r}", param="thread_id", code="thread_has_active_run"
        )
    if admission is not None:
        await admit_run(
            session,
            scope=scope,
            actor=actor,
            agent_id=agent.id,
            agent_version=version.version,
            thread_id=thread_id,
            new_messages=(),
            check_model=check_model,
            admission=admission,
        )
    run_id = new_id("run")
    if active is not None and data.multitask_strategy == "interrupt":
        await cancel_run(session, scope=scope, actor=actor, thread_id=thread_id, run_id=active, jobs=None)
    state = client_loop(spec).new_run(run_id, now_ms=wall_clock_ms())
    history_position = -1  # fixed when a worker first picks the run up (after any run ahead of it)
    if active is None:
        last = (
            await session.execute(
                select(func.max(col(ThreadMessage.position))).where(
                    col(ThreadMessage.tenant_id) == scope.tenant_id, col(ThreadMessage.thread_id) == thread_id
                )
            )
        ).scalar_one_or_none()
        history_position = -1 if last is None else int(last)
    run = Run(
        id=run_id,
        tenant_id=scope.tenant_id,
        thread_id=thread_id,
        agent_id=agent.id,
        agent_version=version.version,
        api_key_id=actor.key_id if actor.key_id.startswith("key_") else None,
        status=state.status.value,
        state=state.to_json(),
        revision=state.revision,
        history_position=history_position,
        metadata_json=dict(data.metadata),
    )
    session.add(run)
    await session.flush()
    initial_events(session, scope, _context(run), state)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="run.create",
        target_type="run",
        target_id=run_id,
        details={"thread_id": thread_id, "agent_id": agent.id, "agent_version": version.version},
    )
    await session.flush()
    # Behind another run, the worker leaves it queued; the run ahead starts it when it ends (or the sweeper).
    enqueue(jobs, EXECUTE_TASK, scope.tenant_id, run_id, session=session)
    return run


async def admit_run(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    agent_id: str,
    agent_version: int | None,
    thread_id: str | None,
    new_messages: Sequence[MessageCreate],
    check_model: ModelCheck,
    admission: Admission,
) -> None:
    """Admit the first model call of a run about to be created, over the thread's messages (``thread_id``; none
    for a new thread) and ``new_messages`` added with it: its rates are charged, its request slot and budgets
    and budgets checked (429, 402), neither held (its worker takes them for the call).

    Call it before the request writes anything.
    """
    _, version = await get_version(session, scope=scope, agent_id=agent_id, version=agent_version)
    spec = AgentSpec.model_validate(version.definition)
    backend = check_model(spec.model)
    messages = []
    if thread_id is not None:
        messages = await history(session, scope=scope, thread_id=thread_id, up_to_position=2**31 - 1)
    wire = [m.to_openai() for m in messages] + [{"role": m.role, "content": m.content} for m in new_messages]
    if spec.instructions:
        wire.insert(0, {"role": "system", "content": spec.instructions})
    prompt_tokens = await count_prompt_tokens_off_loop(wire)
    cap = admission.settings.max_output_tokens
    call = ModelCall(
        scope=scope,
        api_key_id=actor.key_id if actor.key_id.startswith("key_") else None,
        agent_id=version.agent_id,
        backend=backend,
        prompt_tokens=prompt_tokens,
        output_tokens=most_output_tokens(backend, prompt_tokens, spec.model_params.max_tokens, max_output_tokens=cap),
        holder=f"run-admission/{secrets.token_hex(8)}",
    )
    await admission.admit_ahead(call)


async def get_run(session: AsyncSession, *, scope: TenantScope, thread_id: str, run_id: str) -> RunPublic:
    return RunPublic.of(await run_row(session, scope, thread_id, run_id))


async def list_runs(
    session: AsyncSession, *, scope: TenantScope, thread_id: str, params: CursorParams
) -> Page[RunPublic]:
    await thread_row(session, scope, thread_id)
    statement = select(Run).where(col(Run.tenant_id) == scope.tenant_id, col(Run.thread_id) == thread_id)
    return await paginate(session, statement, col(Run.id), params, RunPublic.of)


async def list_steps(
    session: AsyncSession, *, scope: TenantScope, thread_id: str, run_id: str, params: CursorParams
) -> Page[StepPublic]:
    """The run's steps in order (``after``/``before`` are step ids)."""
    run = await run_row(session, scope, thread_id, run_id)
    steps = sorted(RunState.model_validate(run.state).steps, key=lambda s: s.index)
    if params.order == "desc":
        steps.reverse()
    ids = [s.id for s in steps]
    for param, cursor in (("after", params.after), ("before", params.before)):
        if cursor is not None and cursor not in ids:
            raise unknown_cursor(param, cursor)
    start = ids.index(params.after) + 1 if params.after is not None else 0
    end = ids.index(params.before) if params.before is not None else len(steps)
    window = steps[start:end]
    if params.before is not None and params.after is None:
        chosen = window[-params.limit :]
        has_more = len(window) > params.limit
    else:
        chosen = window[: params.limit]
        has_more = len(window) > params.limit
    return Page[StepPublic](
        data=[StepPublic.of(run, s) for s in chosen],
        first_id=chosen[0].id if chosen else None,
        last_id=chosen[-1].id if chosen else None,
        has_more=has_more,
    )


async def cancel_run(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    thread_id: str,
    run_id: str,
    jobs: JobSender | None,
) -> RunPublic:
    """Cancel (idempotent). A run no live worker holds is cancelled at once; a running one at its next step."""
    run = await run_row(session, scope, thread_id, run_id)
    state = RunState.model_validate(run.state)
    if state.status in TERMINAL_STATUSES:
        return RunPublic.of(run)
    await session.execute(
        update(Run)
        .where(col(Run.tenant_id) == scope.tenant_id, col(Run.id) == run_id)
        .values(cancel_requested=True)
        .execution_options(synchronize_session=False)
    )
    # a run put aside for admission has no holder: nothing would see the flag before its time comes
    leased = run.lease_owner is not None and run.lease_expires_at is not None and run.lease_expires_at > utc_now()
    if state.status is RunStatus.REQUIRES_ACTION or not leased:  # no live worker holds it: cancel it now
        cancelled = client_loop(await _spec(session, scope, run)).cancel(state, now_ms=wall_clock_ms())
        # A refused write changes nothing (the conditional UPDATE matched no row): a worker moved the run
        # meanwhile and sees the flag at its next step.
        with contextlib.suppress(StaleRun):
            await save_transition(session, scope=scope, ctx=_context(run), before=state, after=cancelled)
            if jobs is not None:
                await _start_next_queued(session, scope, thread_id, jobs)
    record(session, tenant_id=scope.tenant_id, actor=actor, action="run.cancel", target_type="run", target_id=run_id)
    await session.flush()
    await session.refresh(run)
    return RunPublic.of(run)


async def _start_next_queued(session: AsyncSession, scope: TenantScope, thread_id: str, jobs: JobSender) -> None:
    statement = (
        select(col(Run.id))
        .where(col(Run.tenant_id) == scope.tenant_id, col(Run.thread_id) == thread_id, col(Run.status) == "queued")
        .order_by(col(Run.id))
        .limit(1)
    )
    next_run = (await session.execute(statement)).scalar_one_or_none()
    if next_run is not None:
        enqueue(jobs, EXECUTE_TASK, scope.tenant_id, next_run, session=session)


def _outputs_error(exc: ToolOutputsError) -> Exception:
    if exc.code in ("unknown_tool_call", "missing_tool_outputs"):
        return InvalidRequest(str(exc), param="tool_outputs", code=exc.code)
    if exc.code == "expired":
        return Conflict("the run's required action expired", code="expired")
    return Conflict(f"the run is not waiting for this: {exc}", code=exc.code)


async def _client_transition(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    thread_id: str,
    run_id: str,
    action: str,
    decisions: dict[str, str] | dict[str, bool],
    jobs: JobSender,
) -> Run:
    run = await run_row(session, scope, thread_id, run_id)
    state = RunState.model_validate(run.state)
    loop = client_loop(await _spec(session, scope, run))
    try:
        if action == "run.submit_tool_outputs":
            after = loop.submit_tool_outputs(state, decisions, now_ms=wall_clock_ms())  # type: ignore[arg-type]
        else:
            after = loop.submit_approvals(state, decisions, now_ms=wall_clock_ms())  # type: ignore[arg-type]
    except ToolOutputsError as exc:
        if exc.code == "expired":
            enqueue(jobs, EXECUTE_TASK, scope.tenant_id, run_id)  # now, as the request rolls back: a worker expires it
        raise _outputs_error(exc) from None
    try:
        await save_transition(session, scope=scope, ctx=_context(run), before=state, after=after)
    except StaleRun:
        raise Conflict("the run changed meanwhile; read it and retry", code="run_changed") from None
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action=action,
        target_type="run",
        target_id=run_id,
        details={"decisions": decisions},
    )
    await session.flush()
    await session.refresh(run)
    enqueue(jobs, EXECUTE_TASK, scope.tenant_id, run_id, session=session)
    return run


async def submit_tool_outputs(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    thread_id: str,
    run_id: str,
    data: SubmitToolOutputs,
    jobs: JobSender,
) -> Run:
    outputs = {o.tool_call_id: o.output for o in data.tool_outputs}
    if len(outputs) != len(data.tool_outputs):
        raise InvalidRequest("each tool_call_id may appear once", param="tool_outputs", code="duplicate_tool_call")
    return await _client_transition(
        session,
        scope=scope,
        actor=actor,
        thread_id=thread_id,
        run_id=run_id,
        action="run.submit_tool_outputs",
        decisions=outputs,
        jobs=jobs,
    )


async def submit_approvals(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    thread_id: str,
    run_id: str,
    data: SubmitApprovals,
    jobs: JobSender,
) -> Run:
    decisions = {a.tool_call_id: a.approve for a in data.approvals}
    if len(decisions) != len(data.approvals):
        raise InvalidRequest("each tool_call_id may appear once", param="approvals", code="duplicate_tool_call")
    return await _client_transition(
        session,
        scope=scope,
        actor=actor,
        thread_id=thread_id,
        run_id=run_id,
        action="run.approvals",
        decisions=decisions,
        jobs=jobs,
    )
