"""Server-side tools of /v1/responses — an MCP server (listed, called, approved) and Switchyard's built-ins —
agents invoked as prompts, and background responses (queued, streamed from any point, cancelled)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from sqlalchemy import select

from switchyard.agents import StaticResolver
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import run_inline
from tests.platform.conftest import bearer
from tests.platform.responses.conftest import LOOKUPS

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


def _mcp(port: int, approval: str) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "kb",
        "server_url": f"http://mcp.test:{port}/mcp",
        "require_approval": approval,
    }


def _loopback_tools(client: Any) -> None:
    client.app.state.tool_options = {"resolver": StaticResolver({"mcp.test": ["127.0.0.1"]}), "allow_loopback": True}


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent).order_by(UsageEvent.id))).scalars())


async def test_an_mcp_server_is_listed_and_called_on_the_server(client: Any, make_tenant: Any, mcp_port: int) -> None:
    _loopback_tools(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    LOOKUPS.clear()
    response = await sdk.responses.create(
        model=MODEL, input="Please use kb__lookup with key=paris", tools=[_mcp(mcp_port, "never")]
    )
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"]
    listing, call, _ = response.output
    assert [tool.name for tool in listing.tools] == ["lookup"]  # type: ignore[union-attr]
    assert (call.server_label, call.name, call.output) == ("kb", "lookup", "the value of paris is 42")  # type: ignore[union-attr]
    assert LOOKUPS == ["paris"]
    assert "the value of paris is 42" in response.output_text
    assert [e.event_id for e in await _usage(client)] == [f"{response.id}_step_0", f"{response.id}_step_2"]


async def test_an_mcp_call_waits_for_approval_and_runs_once_approved(
    client: Any, make_tenant: Any, mcp_port: int
) -> None:
    _loopback_tools(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    LOOKUPS.clear()
    tools = [_mcp(mcp_port, "always")]
    asking = await sdk.responses.create(model=MODEL, input="Use kb__lookup with key=rome", tools=tools)
    request = asking.output[-1]
    assert request.type == "mcp_approval_request"
    assert (request.server_label, request.name) == ("kb", "lookup")
    assert LOOKUPS == []
    approved = await sdk.responses.create(
        model=MODEL,
        previous_response_id=asking.id,
        tools=tools,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
    )
    assert [item.type for item in approved.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert LOOKUPS == ["rome"]
    denied_first = await sdk.responses.create(model=MODEL, input="Use kb__lookup with key=oslo", tools=tools)
    denied = await sdk.responses.create(
        model=MODEL,
        previous_response_id=denied_first.id,
        tools=tools,
        input=[{"type": "mcp_approval_response", "approval_request_id": denied_first.output[-1].id, "approve": False}],
    )
    assert denied.output[1].type == "mcp_call"
    assert denied.output[1].error  # type: ignore[union-attr]
    assert LOOKUPS == ["rome"]  # never called


async def test_a_builtin_tool_runs_on_the_server(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model=MODEL, input="Use calculator with expression=6*7", tools=[{"type": "calculator"}]
    )
    call = next(item for item in response.output if item.type == "mcp_call")
    assert (call.server_label, call.name, call.output) == ("switchyard", "calculator", '{"result": 42}')  # type: ignore[union-attr]


async def test_an_agent_runs_as_a_prompt_with_its_instructions_tools_and_model(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = bearer(tenant.keys["developer"])
    agent = await client.post(
        "/v1/agents",
        json={
            "name": "math",
            "model": MODEL,
            "instructions": "You answer {{topic}} questions.",
            "tools": [{"type": "calculator"}],
        },
        headers=headers,
    )
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model="any-model-the-client-has",
        prompt={"id": agent_id, "version": "1", "variables": {"topic": "arithmetic"}},
        input="Use calculator with expression=2+3",
    )
    assert response.model == MODEL
    assert response.instructions == "You answer arithmetic questions."
    assert any(item.type == "mcp_call" and item.output == '{"result": 5}' for item in response.output)  # type: ignore[union-attr]
    assert {e.agent_id for e in await _usage(client)} == {agent_id}
    missing = await client.post(
        "/v1/responses", json={"model": MODEL, "prompt": {"id": "agt_missing"}, "input": "x"}, headers=headers
    )
    assert missing.status_code == 404


async def test_a_background_response_runs_on_a_worker_and_streams_from_any_point(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    queued = await sdk.responses.create(model=MODEL, input="Tell me a story.", background=True)
    assert queued.status == "queued"
    done = await _finished(sdk, queued.id)
    assert done.status in ("completed", "incomplete")
    assert done.output_text
    events = [event async for event in await sdk.responses.retrieve(queued.id, stream=True)]
    names = [event.type for event in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    tail = [e async for e in await sdk.responses.retrieve(queued.id, stream=True, starting_after=3)]
    assert [e.sequence_number for e in tail] == list(range(4, len(events)))
    assert len(await _usage(client)) == 1


async def test_a_queued_background_response_is_cancelled_at_once(client: Any, make_tenant: Any) -> None:
    client.app.state.jobs = _Holding()
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    queued = await sdk.responses.create(model=MODEL, input="Slow.", background=True)
    cancelled = await sdk.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    foreground = await sdk.responses.create(model=MODEL, input="Fast.")
    with pytest.raises(openai.BadRequestError) as refused:
        await sdk.responses.cancel(foreground.id)
    assert refused.value.code == "not_background"


async def _finished(sdk: openai.AsyncOpenAI, response_id: str) -> Any:
    for _ in range(500):
        response = await sdk.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"{response_id} did not finish")


class _Holding:
    """A job sender that keeps the jobs (no worker takes them)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def send_task(self, name: str, args: Any) -> None:
        self.sent.append((name, args))
