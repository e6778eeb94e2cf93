"""What every executed run shares, whatever its front end: billing its model steps (once each), losing a race
(``StaleRun``), and transitions made for the client rather than by the model.

A checkpoint's writes are conditional on the stored ``revision`` (and, for a worker, on still holding the lease),
so of two writers racing on one run or response exactly one succeeds and the other learns it lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.agents import AgentSpec, RunLoop, RunState, StepType, ToolRegistry
from switchyard.platform.billing import budgets
from switchyard.platform.billing.ledger import UsageEventCreate, record_usage
from switchyard.platform.db import TenantScope
from switchyard.platform.models import utc_now

__all__ = ["Attribution", "StaleRun", "bill_model_steps", "client_loop"]


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
    instance_types: Mapping[str, str] = field(default_factory=dict)
    """The instance type serving each model the job may call after a handoff, by served model name."""


def client_loop(spec: AgentSpec) -> RunLoop:
    """A loop for client transitions (tool outputs, approvals, cancel), which use neither tools nor the model."""
    return RunLoop(spec, ToolRegistry(), context_window_tokens=1)


def _ms_time(ms: int | None) -> datetime:
    return utc_now() if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


async def bill_model_steps(
    session: AsyncSession,
    scope: TenantScope,
    ctx: Attribution,
    before: RunState,
    after: RunState,
    reservations: dict[str, str] | None,
) -> None:
    """One usage event per model step ``after`` completed and ``before`` had not (its id is the step's, so a
    step is billed once), each settling its budget hold from ``reservations``; a step made after a handoff is the
    acting agent's (at the version the job fixed). Every step of a workflow run also names the workflow (the job's
    own agent is the workflow), whichever agent acted: a node's, one called as a tool, a guardrail's judge."""
    billed = {s.id for s in before.steps if s.usage is not None}
    workflow_id = ctx.agent_id if after.workflow is not None else None
    for step in after.steps:
        if step.type is not StepType.MODEL_CALL or step.usage is None or step.id in billed:
            continue
        await record_usage(
            session,
            scope=scope,
            event=UsageEventCreate(
                event_id=step.id,
                api_key_id=ctx.api_key_id,
                agent_id=step.agent or ctx.agent_id,
                agent_version=after.agents.get(step.agent, ctx.agent_version) if step.agent else ctx.agent_version,
                run_id=ctx.run_id,
                workflow_id=workflow_id,
                model=step.model or "unknown",
                instance_type=ctx.instance_types.get(step.model or "", ctx.instance_type),
                chip_us=step.chip_us,
                prompt_tokens=step.usage.input_tokens,
                completion_tokens=step.usage.output_tokens,
                cached_tokens=step.usage.cached_input_tokens,
                cache_saved_chip_us=step.cache_saved_chip_us,
                occurred_at=_ms_time(step.completed_at_ms),
            ),
        )
        held = (reservations or {}).pop(step.id, None)
        if held is not None:  # the budget hold of this call becomes its actual spend, with the usage
            await budgets.settle(session, scope=scope, reservation_id=held, actual_chip_us=step.chip_us)
