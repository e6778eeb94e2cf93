"""The context of each trace page: a run of a thread, a stored response, a chat completion (of which only its
usage is kept). Each reader takes an id the caller already found to be the tenant's (``find_execution``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from switchyard.agents import RunState
from switchyard.platform.console.pages.trace_items import item_views
from switchyard.platform.console.pages.trace_timeline import timeline
from switchyard.platform.console.pages.trace_view import AgentRef, message_views, trace_view
from switchyard.platform.console.queries import agent_names, chat_completion, thread_of_run
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import NotFound
from switchyard.platform.responses.store import response_row
from switchyard.platform.runs.schemas import RunPublic
from switchyard.platform.runs.service import run_row
from switchyard.platform.threads.service import history

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["Execution", "chat_trace", "response_trace", "run_trace"]

MAX_INPUT_MESSAGES = 20  # a long thread's earlier messages are counted, not shown


@dataclass(frozen=True, slots=True)
class Execution:
    """The facts at the top of a trace page."""

    kind: str  # run or response
    id: str
    status: str
    agent: AgentRef | None
    agent_version: int | None
    model: str
    input_tokens: int
    output_tokens: int
    chip_us: int
    created_at: datetime
    cached_input_tokens: int | None = None  # of input_tokens, those read from a prefix cache (None: not kept)
    thread_id: str = ""  # a run's thread, a response's conversation
    previous_id: str = ""  # the response it continues


async def _agents(
    session: AsyncSession, scope: TenantScope, own_id: str | None, state: RunState
) -> dict[str, AgentRef]:
    ids = {step.agent for step in state.steps if step.agent} | set(state.agents) | ({own_id} if own_id else set())
    names = await agent_names(session, scope=scope, agent_ids=ids)
    return {agent_id: AgentRef(agent_id, *names.get(agent_id, (agent_id, "agent"))) for agent_id in ids}


async def run_trace(session: AsyncSession, *, scope: TenantScope, run_id: str) -> dict[str, Any]:
    thread_id = await thread_of_run(session, scope=scope, run_id=run_id)
    if thread_id is None:
        raise NotFound(f"no run {run_id!r}", param="run_id")
    row = await run_row(session, scope, thread_id, run_id)
    run, state = RunPublic.of(row), RunState.model_validate(row.state)
    agents = await _agents(session, scope, row.agent_id, state)
    own = agents[row.agent_id]
    inputs = []
    if row.history_position >= 0:
        inputs = await history(session, scope=scope, thread_id=thread_id, up_to_position=row.history_position)
    view = trace_view(state, agents=agents, own=own)
    return {
        "execution": Execution(
            kind="run",
            id=run.id,
            status=run.status,
            agent=own,
            agent_version=run.agent_version,
            model="",
            input_tokens=run.usage.prompt_tokens,
            output_tokens=run.usage.completion_tokens,
            chip_us=run.chip_us,
            created_at=run.created_at,
            cached_input_tokens=run.usage.prompt_tokens_details.cached_tokens,
            thread_id=thread_id,
        ),
        "inputs": message_views(inputs[-MAX_INPUT_MESSAGES:]),
        "inputs_left_out": max(0, len(inputs) - MAX_INPUT_MESSAGES),
        "input_fixed": row.history_position >= 0,
        "view": view,
        "timeline": timeline(view.spans),
    }


async def response_trace(session: AsyncSession, *, scope: TenantScope, response_id: str) -> dict[str, Any]:
    row = await response_row(session, scope, response_id)
    state = RunState.model_validate(row.state) if row.state else None
    own: AgentRef | None = None
    view = None
    if state is not None:
        agents = await _agents(session, scope, row.agent_id, state)
        own = agents.get(row.agent_id or "")
        view = trace_view(state, agents=agents, own=own or AgentRef("", row.model, "model"))
    return {
        "execution": Execution(
            kind="response",
            id=row.id,
            status=row.status,
            agent=own,
            agent_version=row.agent_version,
            model=row.model,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            chip_us=row.chip_us,
            created_at=row.created_at,
            cached_input_tokens=state.usage.cached_input_tokens if state is not None else None,
            thread_id=row.conversation_id or "",
            previous_id=row.previous_response_id or "",
        ),
        "input_items": item_views(row.input_items),
        "output_items": item_views(row.output),
        "view": view,
        "timeline": timeline(view.spans) if view is not None else None,
    }


async def chat_trace(session: AsyncSession, *, scope: TenantScope, completion_id: str) -> dict[str, Any]:
    completion = await chat_completion(session, scope=scope, completion_id=completion_id)
    if completion is None:
        raise NotFound(f"no chat completion {completion_id!r}", param="run_id")
    return {"completion": completion}
