"""Executing a response: claim it (a lease), drive the run loop, checkpoint every transition.

The API process executes a foreground response itself, in a task of its own (a client that goes away stops
nothing: the response finishes and is billed); a worker executes a background one (``responses.execute``). Either
way each transition is one transaction: the state, the output derived from it, the usage of every model call it
completed (one usage event per step, so a step repeated after a crash is billed once), its stream events (background
responses) and, when the response finishes, its output appended to its conversation. A process that dies leaves
the last checkpoint and its lease; ``responses.recover`` hands the response to a worker once the lease passed.
In a worker, a model call that must wait for admission puts the response aside (``lease.postpone``) and raises
``AdmissionDeferred`` for the worker to send it again for then; its first call's rates were charged when it was
created.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlmodel import col

from switchyard.accelerator.pool import PoolEvent
from switchyard.agents import (
    AgentSpec,
    Model,
    RunLoop,
    RunState,
    RunStatus,
    ToolKind,
    ToolRegistry,
    build_tools,
    drive_run,
)
from switchyard.agents.pool_model import PoolModel, pool_token_counter
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import Holds, ModelNotFound, model_backend
from switchyard.platform.db import Database, TenantScope, new_id
from switchyard.platform.models import ResponseEventRecord, ResponseRecord, utc_now
from switchyard.platform.observability.instrument import traced_response, traced_tools
from switchyard.platform.responses.events import ResponseStream, stored_logprobs
from switchyard.platform.responses.items import mcp_listings, output_items, to_messages
from switchyard.platform.responses.objects import FINISHED, response_object, response_status
from switchyard.platform.responses.store import add_conversation_items, chain_items, conversation_items
from switchyard.platform.runs.admitted import AdmissionDeferred, AdmittedModel, time_limit_of
from switchyard.platform.runs.environment import RunEnvironment
from switchyard.platform.runs.lease import cancel_flag, heartbeat, holder, postpone, release, take
from switchyard.platform.runs.persist import Attribution, StaleRun, bill_model_steps, client_loop
from switchyard.platform.runs.stop_on_cancel import StopsOnCancel
from switchyard.platform.runs.turns import take_turn

__all__ = ["EXECUTE_TASK", "Listener", "execute_response"]

EXECUTE_TASK = "responses.execute"
"""The job that drives a background response (and resumes one whose process died)."""

log = logging.getLogger(__name__)

Listener = Callable[[list[tuple[str, dict[str, Any]]]], None]
"""Receives a foreground response's stream events as they happen: ``(type, data)`` pairs."""


async def _claim(env: RunEnvironment, scope: TenantScope, response_id: str, owner: str) -> ResponseRecord | str:
    now = utc_now()
    async with env.database.unit_of_work(scope) as session:
        row = (
            await session.execute(
                select(ResponseRecord).where(
                    col(ResponseRecord.tenant_id) == scope.tenant_id, col(ResponseRecord.id) == response_id
                )
            )
        ).scalar_one_or_none()
        if row is None:
            return "missing"
        if row.status in FINISHED:
            return "finished"
        values = {"lease_expires_at": now + timedelta(seconds=env.lease_s)}
        if not await take(session, scope, ResponseRecord, row, owner, values):
            return "leased"
        if env.worker:
            await take_turn(session, scope)
        return row


async def _history(database: Database, scope: TenantScope, row: ResponseRecord) -> list[dict[str, Any]]:
    """The items before this response's input: its conversation's (as they were when it was created) or the
    chain of responses its ``previous_response_id`` starts."""
    async with database.unit_of_work(scope) as session:
        if row.conversation_id is not None:
            up_to = int(row.request.get("conversation_up_to", -1))
            return await conversation_items(session, scope, row.conversation_id, up_to=up_to)
        if row.previous_response_id is not None:
            previous = (
                await session.execute(
                    select(ResponseRecord).where(
                        col(ResponseRecord.tenant_id) == scope.tenant_id,
                        col(ResponseRecord.id) == row.previous_response_id,
                    )
                )
            ).scalar_one_or_none()
            if previous is not None:
                return await chain_items(session, scope, previous)
    return []


async def _last_event(database: Database, scope: TenantScope, response_id: str) -> int:
    async with database.unit_of_work(scope) as session:
        last = (
            await session.execute(
                select(func.max(col(ResponseEventRecord.sequence_number))).where(
                    col(ResponseEventRecord.tenant_id) == scope.tenant_id,
                    col(ResponseEventRecord.response_id) == response_id,
                )
            )
        ).scalar_one_or_none()
    return -1 if last is None else int(last)


def _kinds(tools: ToolRegistry) -> Callable[[str], ToolKind | None]:
    def kind_of(name: str) -> ToolKind | None:
        tool = tools.get(name)
        return tool.kind if tool is not None else None

    return kind_of


@traced_response  # a span, the response id in logs
async def execute_response(
    env: RunEnvironment,
    *,
    tenant_id: str,
    response_id: str,
    listener: Listener | None = None,
    admitted: Holds | None = None,
) -> str:
    """Drive the response until it finishes; returns its status (or why it was not driven here).

    ``admitted`` holds the first model call's admission, taken by the API before it stored the response;
    ``listener`` receives the stream events of a foreground response, live."""
    scope = TenantScope(tenant_id)
    owner = holder(env.worker_id)
    claimed = await _claim(env, scope, response_id, owner)
    if isinstance(claimed, str):
        if admitted is not None:
            await env.admission.finish(admitted, billed=False)
        return claimed
    row = claimed
    beating = heartbeat(env.database, scope, ResponseRecord, response_id, owner, env.lease_s)
    heartbeat_task = asyncio.get_running_loop().create_task(beating)
    deferred: AdmissionDeferred | None = None
    try:
        return await _drive(env, scope, row, owner, listener, admitted)
    except StaleRun as exc:
        log.info("response %s: %s", response_id, exc)
        return "stale"
    except AdmissionDeferred as exc:
        deferred = exc
        raise
    finally:
        heartbeat_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat_task
        if deferred is not None:
            await postpone(env.database, scope, ResponseRecord, response_id, owner, deferred.until)
        else:
            await release(env.database, scope, ResponseRecord, response_id, owner)


async def _drive(
    env: RunEnvironment,
    scope: TenantScope,
    row: ResponseRecord,
    owner: str,
    listener: Listener | None,
    admitted: Holds | None,
) -> str:
    spec = AgentSpec.model_validate(row.request["spec"])
    state = RunState.model_validate(row.state)
    attribution = Attribution(row.api_key_id, row.agent_id, row.agent_version, None, row.request["instance_type"])
    seeded = int(row.request.get("seeded", 0))
    reservations: dict[str, str] = {}
    tools = ToolRegistry()
    failure: tuple[str, str] | None = None
    try:
        backend = model_backend(env.pool, spec.model, scope.tenant_id)
        # an alias is billed under the served name, as chat completions bill it: one model in the books
        spec = spec.model_copy(update={"model": backend.name})
    except ModelNotFound as exc:
        failure = ("model_not_found", exc.message)
    if failure is None:
        try:
            tools = traced_tools(await build_tools(spec, **env.tool_options))
        except Exception as exc:  # an MCP server that cannot be listed fails the response, with the reason
            failure = ("tool_setup_error", f"{type(exc).__name__}: {exc}")
    kind_of = _kinds(tools)
    listed = mcp_listings(tools, row.id)
    stream = ResponseStream(
        listed=listed,
        response_id=row.id,
        render=lambda st, output: response_object(row, st, output),
        kind_of=kind_of,
        seeded=seeded,
        done_items={item["id"] for item in row.output},
        sequence=await _last_event(env.database, scope, row.id) if row.background else -1,
        logprobs=stored_logprobs(row.output),
    )
    current = state

    async def checkpoint(new: RunState) -> None:
        nonlocal current
        if new.revision == current.revision:
            return
        events = stream.transition(current, new)
        output = stream.annotate(output_items(new, kind_of, seeded=seeded, listed=listed))
        status, _ = response_status(new)
        async with env.database.unit_of_work(scope) as session:
            values: dict[str, Any] = {
                "state": new.to_json(),
                "revision": new.revision,
                "status": status,
                "output": output,
                "chip_us": new.chip_us,
                "input_tokens": new.usage.input_tokens,
                "output_tokens": new.usage.output_tokens,
                "updated_at": utc_now(),
                "lease_expires_at": utc_now() + timedelta(seconds=env.lease_s),
            }
            result = await session.execute(
                update(ResponseRecord)
                .where(
                    col(ResponseRecord.tenant_id) == scope.tenant_id,
                    col(ResponseRecord.id) == row.id,
                    col(ResponseRecord.revision) == current.revision,
                    col(ResponseRecord.lease_owner) == owner,
                )
                .values(values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                raise StaleRun(f"response {row.id} is no longer at revision {current.revision}")
            await bill_model_steps(session, scope, attribution, current, new, reservations)
            if row.background:
                for number, (name, data) in enumerate(events, start=stream.sequence - len(events) + 1):
                    session.add(
                        ResponseEventRecord(
                            id=new_id("revt"),
                            tenant_id=scope.tenant_id,
                            response_id=row.id,
                            sequence_number=number,
                            event=name,
                            data=data,
                        )
                    )
            finishing = status in FINISHED and response_status(current)[0] not in FINISHED
            if finishing and row.conversation_id is not None and output:
                await add_conversation_items(session, scope, row.conversation_id, output, response_id=row.id)
        if env.usage_committed is not None and new.chip_us > current.chip_us:
            env.usage_committed()
        current = new
        row.output = output
        if listener is not None and events:
            listener(events)

    if listener is not None:
        listener(stream.opening(state))
    if failure is not None:
        failed = client_loop(spec).fail(state, code=failure[0], message=failure[1], now_ms=wall_clock_ms())
        await checkpoint(failed)
        return response_status(failed)[0]
    loop = RunLoop(
        spec,
        tools,
        context_window_tokens=backend.context_window,
        token_counter=pool_token_counter,
        reserved_output_tokens=1024,
        call_options=row.request.get("options") or {},
    )
    history = to_messages([*await _history(env.database, scope, row), *row.input_items])

    cancel_requested = cancel_flag(env.database, scope, ResponseRecord, row.id)

    def on_event(event: PoolEvent) -> None:
        stream.record(event)
        if listener is not None:
            events = stream.delta(event)
            if events:
                listener(events)

    inner: Model = (
        env.model_factory(scope.tenant_id, row.id)
        if env.model_factory is not None
        else PoolModel(env.pool, tenant=scope.tenant_id, session=row.id, on_event=on_event)
    )
    if row.background:  # a cancel stops the model call at the fleet, not only the next step
        inner = StopsOnCancel(inner, cancel_requested=cancel_requested, stop=backend.cancel)
    model = AdmittedModel(
        inner,
        admission=env.admission,
        scope=scope,
        backend=backend,
        api_key_id=row.api_key_id,
        agent_id=row.agent_id,
        reservations=reservations,
        admitted=admitted,
        # its first call's rates were charged when it was created (POST /v1/responses)
        rates_charged=admitted is None and not any(step.usage is not None for step in state.steps),
        defer=env.worker,
        waiting_since=row.updated_at,
    )
    try:
        final, _action = await drive_run(
            loop,
            state,
            thread=history,
            model=model,
            checkpoint=checkpoint,
            tenant_id=scope.tenant_id,
            cancel_requested=cancel_requested if row.background else None,
        )
    except AdmissionDeferred as deferred:
        raise deferred.capped(time_limit_of(spec, current)) from None
    if final.status is RunStatus.REQUIRES_ACTION:
        return "completed"
    return response_status(final)[0]
