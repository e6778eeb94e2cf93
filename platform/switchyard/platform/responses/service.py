"""Creating a response: everything checked before anything is stored, then one transaction.

In order, each refusal changing nothing: the definition (``prompt``'s agent, tools, ``text.format``; 400/404), the
history it continues (``previous_response_id`` or ``conversation``, not both; 404 for another tenant's), the input
items (400 naming the item), the model (404) and the context window (400). The first model call is then admitted
as a chat completion is (429/402), background or not, and only then the response is stored, queued, its input
appended to its conversation.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.accelerator.pool import Backend, count_prompt_tokens_off_loop
from switchyard.agents import AgentSpec, RunState, RunStatus
from switchyard.agents.runner import wall_clock_ms
from switchyard.platform.admission import ModelCall, model_backend, most_output_tokens, refuse_oversized
from switchyard.platform.admission.service import Admission, Holds
from switchyard.platform.agent_registry.service import get_version
from switchyard.platform.auth.principal import Principal
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.bodies import stored_integer
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.models import ResponseEventRecord, ResponseRecord
from switchyard.platform.responses.definition import ResponseDefinition, define
from switchyard.platform.responses.items import approval_decisions, input_items, to_messages
from switchyard.platform.responses.objects import response_object
from switchyard.platform.responses.schemas import FILE_SEARCH_RESULTS, ResponseCreate
from switchyard.platform.responses.store import (
    add_conversation_items,
    chain_items,
    conversation_items,
    conversation_row,
    response_row,
)

__all__ = ["Prepared", "add_input_to_conversation", "admit", "not_background", "prepare", "store"]

_ECHOED = (
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "parallel_tool_calls",
    "prompt",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
    "metadata",
)


@dataclass
class Prepared:
    """A checked request: what to store, and the first model call to admit."""

    data: ResponseCreate
    definition: ResponseDefinition
    backend: Backend
    items: list[dict[str, Any]]
    state: RunState
    seeded: int
    conversation_up_to: int | None
    call: ModelCall | None


def _agent_version(version: str | None) -> int | None:
    return None if version is None else stored_integer(version, param="prompt.version")


def _seed(previous: ResponseRecord, decisions: dict[str, bool], now_ms: int, response_id: str) -> tuple[RunState, int]:
    """A response continuing ``previous``'s calls that awaited approval: its state starts with those calls."""
    earlier = RunState.model_validate(previous.state)
    action = earlier.required_action
    if earlier.status is not RunStatus.REQUIRES_ACTION or action is None or action.type != "approval":
        raise InvalidRequest(
            "mcp_approval_response items answer a response whose output asks for approval",
            param="input",
            code="no_pending_approval",
        )
    approvals = {call.id: decisions.get(call.id, False) for call in action.tool_calls}
    if earlier.workflow is not None:  # a workflow goes on from its approval node, its agents' versions kept
        state = RunState(
            run_id=response_id,
            created_at_ms=now_ms,
            workflow=earlier.workflow,
            agents=earlier.agents,
            approvals=approvals,
        )
        return state, 0
    asking = earlier.messages[-1]
    seeded = asking.model_copy(update={"content": None})
    return RunState(run_id=response_id, created_at_ms=now_ms, messages=[seeded], approvals=approvals), 1


def _seed_workflow(previous: ResponseRecord | None, now_ms: int, response_id: str) -> RunState:
    """A response's first state: a workflow that waited for the client's function outputs goes on from the node
    that asked (the outputs come as ``function_call_output`` items, which the loop takes); else a new run."""
    earlier = RunState.model_validate(previous.state) if previous is not None else None
    action = earlier.required_action if earlier is not None else None
    if earlier is None or earlier.workflow is None or action is None or action.type != "submit_tool_outputs":
        return RunState(run_id=response_id, created_at_ms=now_ms)
    return RunState(run_id=response_id, created_at_ms=now_ms, workflow=earlier.workflow, agents=earlier.agents)


async def prepare(
    session: AsyncSession, *, scope: TenantScope, data: ResponseCreate, pool: Any, max_output_tokens: int
) -> tuple[Prepared, str]:
    """Check ``data`` against the tenant's agents, responses, conversations and models; returns the prepared
    response and its new id."""
    response_id = new_id("resp")
    agent = None
    if data.prompt is not None:
        found, version = await get_version(
            session, scope=scope, agent_id=data.prompt.id, version=_agent_version(data.prompt.version)
        )
        agent = (found.id, version.version, AgentSpec.model_validate(version.definition))
    definition = define(data, agent)
    if data.previous_response_id is not None and data.conversation is not None:
        raise InvalidRequest(
            "previous_response_id and conversation cannot both be given", param="conversation", code="invalid_request"
        )
    items = input_items(data.input)
    history: list[dict[str, Any]] = []
    previous = None
    conversation_up_to = None
    if data.previous_response_id is not None:
        previous = await response_row(session, scope, data.previous_response_id, param="previous_response_id")
        history = await chain_items(session, scope, previous)
    elif data.conversation_id is not None:
        conversation = await conversation_row(session, scope, data.conversation_id, param="conversation")
        history = await conversation_items(session, scope, data.conversation_id)
        conversation_up_to = conversation.next_position - 1  # positions have gaps where items were deleted
    now_ms = wall_clock_ms()
    decisions = approval_decisions(items)
    seeded = 0
    if decisions:
        if previous is None:
            raise InvalidRequest(
                "mcp_approval_response items need the previous_response_id that asked for approval",
                param="previous_response_id",
            )
        state, seeded = _seed(previous, decisions, now_ms, response_id)
    else:
        state = _seed_workflow(previous, now_ms, response_id)
    if not items:
        raise InvalidRequest("input has no items", param="input", code="missing_input")
    backend = model_backend(pool, definition.spec.model, scope.tenant_id, task="chat")
    messages = to_messages([*history, *items])
    wire = [m.to_openai() for m in messages]
    if definition.spec.instructions:
        wire.insert(0, {"role": "system", "content": definition.spec.instructions})
    prompt_tokens = await count_prompt_tokens_off_loop(wire)
    output_cap = definition.spec.model_params.max_tokens
    refuse_oversized(
        backend, prompt_tokens, output_cap, max_output_tokens=max_output_tokens, names=("max_output_tokens", "input")
    )
    call = ModelCall(
        scope=scope,
        api_key_id=None,
        agent_id=definition.agent_id,
        backend=backend,
        prompt_tokens=prompt_tokens,
        output_tokens=most_output_tokens(backend, prompt_tokens, output_cap, max_output_tokens=max_output_tokens),
        holder=f"{response_id}/{secrets.token_hex(6)}",
    )
    prepared = Prepared(data, definition, backend, items, state, seeded, conversation_up_to, call)
    return prepared, response_id


async def admit(admission: Admission, prepared: Prepared, principal: Principal) -> Holds | None:
    """The response's first model call, admitted now, foreground or background: refused as a chat completion
    would be (429, 402), before anything is stored. A foreground response keeps what it holds for the call it
    makes next; a background one is admitted ahead (``Admission.admit_ahead``): its worker takes the request slot
    and budget hold when it makes the call."""
    if prepared.call is None:
        return None
    call = replace(prepared.call, api_key_id=principal.key_id)
    if prepared.data.background:
        await admission.admit_ahead(call)
        return None
    return await admission.admit(call)


async def store(
    session: AsyncSession, *, scope: TenantScope, principal: Principal, prepared: Prepared, response_id: str
) -> ResponseRecord:
    """Add the response row (and, for background, its ``response.created`` event); the caller commits."""
    data = prepared.data
    echo = {key: getattr(data, key) for key in _ECHOED}
    echo["prompt"] = data.prompt.model_dump(mode="json") if data.prompt else None
    echo["text"] = data.text.model_dump(mode="json", exclude_none=True) if data.text else None
    echo["instructions"] = prepared.definition.spec.instructions or None
    row = ResponseRecord(
        id=response_id,
        tenant_id=scope.tenant_id,
        api_key_id=principal.key_id if principal.key_id.startswith("key_") else None,
        agent_id=prepared.definition.agent_id,
        agent_version=prepared.definition.agent_version,
        conversation_id=data.conversation_id,
        previous_response_id=data.previous_response_id,
        model=prepared.backend.name,
        status="queued",
        background=bool(data.background),
        stored=data.store is not False,
        request={
            "spec": prepared.definition.spec.model_dump(mode="json"),
            "options": prepared.definition.options,
            "instance_type": prepared.backend.spec.instance,
            "seeded": prepared.seeded,
            "file_search_results": FILE_SEARCH_RESULTS in (data.include or ()),
            "conversation_up_to": prepared.conversation_up_to,
            "prompt_cache_key": data.prompt_cache_key,
            "echo": echo,
        },
        input_items=prepared.items,
        output=[],
        state=prepared.state.to_json(),
        revision=prepared.state.revision,
    )
    session.add(row)
    await session.flush()  # before its event, which refers to it
    if row.background:
        created = {"type": "response.created", "sequence_number": 0, "response": response_object(row)}
        session.add(
            ResponseEventRecord(
                id=new_id("revt"),
                tenant_id=scope.tenant_id,
                response_id=row.id,
                sequence_number=0,
                event="response.created",
                data=created,
            )
        )
    return row


async def add_input_to_conversation(session: AsyncSession, scope: TenantScope, row: ResponseRecord) -> None:
    if row.conversation_id is not None and row.input_items:
        await add_conversation_items(session, scope, row.conversation_id, row.input_items, response_id=row.id)


def not_background(row: ResponseRecord) -> None:
    if not row.background:
        raise InvalidRequest("only background responses can be cancelled", param="response_id", code="not_background")
