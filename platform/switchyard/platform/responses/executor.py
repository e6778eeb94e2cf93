"""Responses as a front end of the execution kernel (``execution/kernel.py``): when a response may be driven, its
history (a conversation's or a chain of responses'), and how a transition is stored and streamed.

The API process executes a foreground response itself, in a task of its own (a client that goes away stops
nothing: the response finishes and is billed); a worker executes a background one (``responses.execute``). Either
way each transition is one transaction: the state, the output derived from it, the usage of every model call it
completed (one usage event per step, so a step repeated after a crash is billed once), its stream events (background
responses) and, when the response finishes, its output appended to its conversation. A process that dies leaves
the last checkpoint and its lease; ``responses.recover`` hands the response to a worker once the lease passed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import PoolEvent
from switchyard.agents import AgentSpec, Message, RunState, RunStatus, ToolKind
from switchyard.platform.admission import Holds
from switchyard.platform.db import Database, TenantScope, new_id
from switchyard.platform.execution.cast import Cast
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.kernel import execute
from switchyard.platform.execution.steps import Attribution, StaleRun, bill_model_steps
from switchyard.platform.models import ResponseEventRecord, ResponseRecord, utc_now
from switchyard.platform.observability.instrument import traced_response
from switchyard.platform.responses.events import ResponseStream, stored_logprobs
from switchyard.platform.responses.items import mcp_listings, output_items, to_messages
from switchyard.platform.responses.objects import FINISHED, response_object, response_status
from switchyard.platform.responses.store import add_conversation_items, chain_items, conversation_items

__all__ = ["EXECUTE_TASK", "Listener", "execute_response"]

EXECUTE_TASK = "responses.execute"
"""The job that drives a background response (and resumes one whose process died)."""

log = logging.getLogger(__name__)

Listener = Callable[[list[tuple[str, dict[str, Any]]]], None]
"""Receives a foreground response's stream events as they happen: ``(type, data)`` pairs."""


class _Responses:
    """The kernel's front end for responses: claims a response unless it is finished."""

    table = ResponseRecord

    def __init__(self, listener: Listener | None) -> None:
        self.listener = listener

    async def claimable(self, session: AsyncSession, scope: TenantScope, row: Any) -> str | dict[str, Any]:
        return "finished" if row.status in FINISHED else {}

    async def open(self, env: RunEnvironment, session: AsyncSession, scope: TenantScope, row: Any) -> _ResponseJob:
        sequence = await _last_event(session, scope, row.id) if row.background else -1
        return _ResponseJob(env, scope, row, sequence, self.listener)


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


async def _last_event(session: AsyncSession, scope: TenantScope, response_id: str) -> int:
    last = (
        await session.execute(
            select(func.max(col(ResponseEventRecord.sequence_number))).where(
                col(ResponseEventRecord.tenant_id) == scope.tenant_id,
                col(ResponseEventRecord.response_id) == response_id,
            )
        )
    ).scalar_one_or_none()
    return -1 if last is None else int(last)


def fleet_session(row: ResponseRecord) -> str:
    """What keeps a response's model calls on one replica while none caches its prompt yet: the client's
    ``prompt_cache_key``, else its conversation, else the agent version it runs (their instructions and tools are
    one prefix), else the response itself."""
    agent_version = f"{row.agent_id}@{row.agent_version}" if row.agent_id and row.agent_version is not None else None
    return row.request.get("prompt_cache_key") or row.conversation_id or agent_version or row.id


class _ResponseJob:
    """A claimed response: its transitions go to its row (state and output), its usage, its stored stream events
    (background) or its listener (foreground), and, when it finishes, its conversation."""

    def __init__(
        self, env: RunEnvironment, scope: TenantScope, row: ResponseRecord, sequence: int, listener: Listener | None
    ) -> None:
        self.env = env
        self.scope = scope
        self.row = row
        self.owner = row.lease_owner
        self.sequence = sequence
        self.listener = listener
        self.spec = AgentSpec.model_validate(row.request["spec"])
        self.state = RunState.model_validate(row.state)
        self.session_key = fleet_session(row)
        self.api_key_id: str | None = row.api_key_id
        self.agent_id: str | None = row.agent_id
        self.waiting_since: datetime = row.updated_at
        self.call_options: dict[str, Any] = row.request.get("options") or {}
        self.cancellable = row.background  # a foreground response is cancelled by its client going away: it is not
        self.reservations: dict[str, str] = {}
        self.attribution = Attribution(
            row.api_key_id, row.agent_id, row.agent_version, None, row.request["instance_type"]
        )
        self.seeded = int(row.request.get("seeded", 0))
        self.file_search_results = bool(row.request.get("file_search_results"))
        self.kind_of: Callable[[str], ToolKind | None] = lambda name: None
        self.listed: list[dict[str, Any]] = []
        self.stream: ResponseStream | None = None

    def start(self, cast: Cast | None) -> None:
        row = self.row
        if cast is not None:
            self.kind_of = cast.kind_of
            self.listed = mcp_listings(cast.tools, row.id)
            self.attribution = replace(self.attribution, instance_types=cast.instance_types())
        self.stream = ResponseStream(
            listed=self.listed,
            response_id=row.id,
            render=lambda st, output: response_object(row, st, output),
            kind_of=self.kind_of,
            seeded=self.seeded,
            file_search_results=self.file_search_results,
            done_items={item["id"] for item in row.output},
            sequence=self.sequence,
            logprobs=stored_logprobs(row.output),
        )
        if self.listener is not None:
            self.listener(self.stream.opening(self.state))

    async def history(self) -> list[Message]:
        return to_messages([*await _history(self.env.database, self.scope, self.row), *self.row.input_items])

    async def checkpoint(self, new: RunState) -> None:
        current, row, stream, scope = self.state, self.row, self.stream, self.scope
        assert stream is not None  # opened by start()
        if new.revision == current.revision:
            return
        events = stream.transition(current, new)
        output = stream.annotate(
            output_items(
                new,
                self.kind_of,
                seeded=self.seeded,
                listed=self.listed,
                file_search_results=self.file_search_results,
            )
        )
        status, _ = response_status(new)
        async with self.env.database.unit_of_work(scope) as session:
            values: dict[str, Any] = {
                "state": new.to_json(),
                "revision": new.revision,
                "status": status,
                "output": output,
                "chip_us": new.chip_us,
                "input_tokens": new.usage.input_tokens,
                "output_tokens": new.usage.output_tokens,
                "updated_at": utc_now(),
                "lease_expires_at": utc_now() + timedelta(seconds=self.env.lease_s),
            }
            result = await session.execute(
                update(ResponseRecord)
                .where(
                    col(ResponseRecord.tenant_id) == scope.tenant_id,
                    col(ResponseRecord.id) == row.id,
                    col(ResponseRecord.revision) == current.revision,
                    col(ResponseRecord.lease_owner) == self.owner,
                )
                .values(values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                raise StaleRun(f"response {row.id} is no longer at revision {current.revision}")
            await bill_model_steps(session, scope, self.attribution, current, new, self.reservations)
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
        if self.env.usage_committed is not None and new.chip_us > current.chip_us:
            self.env.usage_committed()
        self.state = new
        row.output = output
        if self.listener is not None and events:
            self.listener(events)

    def on_event(self, event: PoolEvent) -> None:
        assert self.stream is not None  # opened by start()
        self.stream.record(event)
        if self.listener is not None:
            events = self.stream.delta(event)
            if events:
                self.listener(events)

    def outcome(self, final: RunState) -> str:
        if final.status is RunStatus.REQUIRES_ACTION:  # a response waiting for tool outputs is complete
            return "completed"
        return response_status(final)[0]

    async def close(self) -> None:
        pass


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
    return await execute(env, _Responses(listener), tenant_id=tenant_id, job_id=response_id, admitted=admitted)
