"""Writing one run transition: the new state, its events, its messages and its usage, in one transaction.

Every write is conditional on the stored ``revision`` (and, for a worker, on still holding the lease), so of
two writers racing on one run exactly one succeeds and the other learns it lost (``StaleRun``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec, RunLoop, RunState, StepType, ToolRegistry, events_between
from switchyard.platform.billing import budgets
from switchyard.platform.billing.ledger import UsageEventCreate, record_usage
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.models import Run, RunEventRecord, utc_now
from switchyard.platform.threads.service import append_messages

__all__ = [
    "Attribution",
    "RunContext",
    "StaleRun",
    "bill_model_steps",
    "client_loop",
    "initial_events",
    "save_transition",
]


class StaleRun(Exception):
    """The run changed under us (another writer, a cancel) or our lease passed: stop working on it."""


@dataclass(frozen=True)
class Attribution:
    """Whose model steps are billed: the usage events' key, agent, run and instance type."""

    api_key_id: str | None
    agent_id: str | None
    agent_version: int | None
    run_id: str | None
    instance_type: str


@dataclass(frozen=True)
class RunContext:
    """What a transition's side records need to know about the run."""

    run_id: str
    thread_id: str
    agent_id: str
    agent_version: int
    api_key_id: str | None
    instance_type: str

    @property
    def attribution(self) -> Attribution:
        return Attribution(self.api_key_id, self.agent_id, self.agent_version, self.run_id, self.instance_type)


def client_loop(spec: AgentSpec) -> RunLoop:
    """A loop for client transitions (tool outputs, approvals, cancel), which use neither tools nor the model."""
    return RunLoop(spec, ToolRegistry(), context_window_tokens=1)


def _payload(name: str, data: dict[str, object], ctx: RunContext) -> dict[str, object]:
    """The stored event data: the library's payload with the OpenAI-style ``object`` and the thread id."""
    if name.startswith("thread.run.step."):
        kind = "thread.run.step"
    elif name.startswith("thread.message."):
        kind = "thread.message"
    else:
        kind = "thread.run"
    return {"object": kind, **data, "thread_id": ctx.thread_id}


def _ms_time(ms: int | None) -> datetime:
    return utc_now() if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


async def _append_events(
    session: AsyncSession,
    scope: TenantScope,
    ctx: RunContext,
    before: RunState | None,
    after: RunState,
    announced: Collection[str] = (),
) -> int:
    events = [
        e
        for e in events_between(before, after)
        if not (e.event == "thread.message.created" and e.data.get("id") in announced)
    ]
    if not events:
        return 0
    last = (
        await session.execute(
            select(func.max(col(RunEventRecord.sequence_number))).where(
                col(RunEventRecord.tenant_id) == scope.tenant_id, col(RunEventRecord.run_id) == ctx.run_id
            )
        )
    ).scalar_one_or_none() or 0
    for offset, event in enumerate(events, start=1):
        session.add(
            RunEventRecord(
                id=new_id("evt"),
                tenant_id=scope.tenant_id,
                run_id=ctx.run_id,
                sequence_number=last + offset,
                event=event.event,
                data=_payload(event.event, event.data, ctx),
            )
        )
    return len(events)


def initial_events(session: AsyncSession, scope: TenantScope, ctx: RunContext, state: RunState) -> None:
    """The ``thread.run.created`` / ``queued`` events of a new run (numbered from 1)."""
    for number, event in enumerate(events_between(None, state), start=1):
        session.add(
            RunEventRecord(
                id=new_id("evt"),
                tenant_id=scope.tenant_id,
                run_id=ctx.run_id,
                sequence_number=number,
                event=event.event,
                data=_payload(event.event, event.data, ctx),
            )
        )


async def bill_model_steps(
    session: AsyncSession,
    scope: TenantScope,
    ctx: Attribution,
    before: RunState,
    after: RunState,
    reservations: dict[str, str] | None,
) -> None:
    """One usage event per model step ``after`` completed and ``before`` had not (its id is the step's, so a
    step is billed once), each settling its budget hold from ``reservations``."""
    billed = {s.id for s in before.steps if s.usage is not None}
    for step in after.steps:
        if step.type is not StepType.MODEL_CALL or step.usage is None or step.id in billed:
            continue
        await record_usage(
            session,
            scope=scope,
            event=UsageEventCreate(
                event_id=step.id,
                api_key_id=ctx.api_key_id,
                agent_id=ctx.agent_id,
                agent_version=ctx.agent_version,
                run_id=ctx.run_id,
                model=step.model or "unknown",
                instance_type=ctx.instance_type,
                chip_us=step.chip_us,
                prompt_tokens=step.usage.input_tokens,
                completion_tokens=step.usage.output_tokens,
                occurred_at=_ms_time(step.completed_at_ms),
            ),
        )
        held = (reservations or {}).pop(step.id, None)
        if held is not None:  # the budget hold of this call becomes its actual spend, with the usage
            await budgets.settle(session, scope=scope, reservation_id=held, actual_chip_us=step.chip_us)


async def save_transition(
    session: AsyncSession,
    *,
    scope: TenantScope,
    ctx: RunContext,
    before: RunState,
    after: RunState,
    lease_owner: str | None = None,
    lease_s: float | None = None,
    reservations: dict[str, str] | None = None,
    announced: Collection[str] = (),
) -> None:
    """Store ``after`` (which follows ``before``), its events, new messages and model-step usage.

    ``reservations`` (step id → budget hold) are settled as their steps are billed; messages in ``announced``
    already have their ``thread.message.created`` event (streamed before their deltas), so it is not repeated.
    Raises ``StaleRun`` when the stored revision is not ``before.revision`` or (with ``lease_owner``) the lease
    is held by someone else. The caller commits.
    """
    if after.revision == before.revision:
        return
    now = utc_now()
    values: dict[str, object] = {
        "state": after.to_json(),
        "revision": after.revision,
        "status": after.status.value,
        "chip_us": after.chip_us,
        "input_tokens": after.usage.input_tokens,
        "output_tokens": after.usage.output_tokens,
        "updated_at": now,
    }
    statement = update(Run).where(
        col(Run.tenant_id) == scope.tenant_id, col(Run.id) == ctx.run_id, col(Run.revision) == before.revision
    )
    if lease_owner is not None:
        statement = statement.where(col(Run.lease_owner) == lease_owner)
        if lease_s is not None:
            values["lease_expires_at"] = now + timedelta(seconds=lease_s)
    result = await session.execute(statement.values(values).execution_options(synchronize_session=False))
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise StaleRun(f"run {ctx.run_id} is no longer at revision {before.revision}")
    new_messages = after.messages[len(before.messages) :]
    if new_messages:
        await append_messages(session, scope=scope, thread_id=ctx.thread_id, messages=new_messages, run_id=ctx.run_id)
    await _append_events(session, scope, ctx, before, after, announced)
    await bill_model_steps(session, scope, ctx.attribution, before, after, reservations)
