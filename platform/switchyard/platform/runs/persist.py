"""Writing one run transition: the new state, its events, its messages and its usage, in one transaction.

Every write is conditional on the stored ``revision`` (and, for a worker, on still holding the lease), so of
two writers racing on one run exactly one succeeds and the other learns it lost (``StaleRun``, the kernel's).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import RunState, events_between
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.execution.steps import Attribution, StaleRun, bill_model_steps
from switchyard.platform.models import Run, RunEventRecord, utc_now
from switchyard.platform.threads.service import append_messages

__all__ = ["RunContext", "initial_events", "save_transition"]


@dataclass(frozen=True)
class RunContext:
    """What a transition's side records need to know about the run."""

    run_id: str
    thread_id: str
    agent_id: str
    agent_version: int
    api_key_id: str | None
    instance_type: str
    instance_types: Mapping[str, str] = field(default_factory=dict)

    @property
    def attribution(self) -> Attribution:
        run = (self.api_key_id, self.agent_id, self.agent_version, self.run_id)
        return Attribution(*run, self.instance_type, self.instance_types)


def _payload(name: str, data: dict[str, object], ctx: RunContext) -> dict[str, object]:
    """The stored event data: the library's payload with the OpenAI-style ``object`` and the thread id."""
    if name.startswith("thread.run.step."):
        kind = "thread.run.step"
    elif name.startswith("thread.message."):
        kind = "thread.message"
    else:
        kind = "thread.run"
    return {"object": kind, **data, "thread_id": ctx.thread_id}


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
