"""A Responses request's MCP ``headers`` and ``authorization`` reach the MCP server and nothing else: not the
response (any role), not its stored stream, not ``responses.request`` or ``response_events.data`` in clear."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from sqlalchemy import select

from switchyard.agents import StaticResolver
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ResponseEventRecord, ResponseRecord
from tests.platform.agents_api.factories import run_inline
from tests.platform.agents_api.mcp_recorder import SECRET_PART, TOKEN, RecordingMcpServer, recording_mcp_server

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
REDACTED = "<redacted>"
LOOPBACK = {"resolver": StaticResolver({"mcp.test": ["127.0.0.1"]}), "allow_loopback": True}


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RecordingMcpServer]:
    with recording_mcp_server() as server:
        yield server


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _stored(client: Any) -> str:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        requests = (await session.execute(select(ResponseRecord.request))).scalars().all()
        events = (await session.execute(select(ResponseEventRecord.data))).scalars().all()
    return json.dumps([requests, events])


async def _finished(sdk: openai.AsyncOpenAI, response_id: str) -> Any:
    for _ in range(500):
        response = await sdk.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"{response_id} did not finish")


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_mcp_headers_reach_the_server_and_no_answer_or_row(
    client: Any, make_tenant: Any, mcp_server: RecordingMcpServer, background: bool
) -> None:
    client.app.state.tool_options = LOOPBACK
    run_inline(client, **LOOPBACK)
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    tools: list[Any] = [
        {
            "type": "mcp",
            "server_label": "kb",
            "server_url": mcp_server.url(),
            "require_approval": "never",
            "headers": {"Authorization": TOKEN},
        },
        {
            "type": "mcp",
            "server_label": "kb2",
            "server_url": mcp_server.url(),
            "require_approval": "never",
            "authorization": "sk-mcp-0123456789-as-an-oauth-token",
        },
    ]
    mcp_server.authorizations.clear()
    created = await sdk.responses.create(
        model=MODEL, input="Please use kb__lookup with key=paris", tools=tools, background=background
    )
    assert SECRET_PART not in created.model_dump_json()
    response = await _finished(sdk, created.id) if background else created
    assert "mcp_call" in [item.type for item in response.output]
    assert TOKEN in mcp_server.authorizations
    assert "Bearer sk-mcp-0123456789-as-an-oauth-token" in mcp_server.authorizations  # kb2 was listed
    for role in ("viewer", "developer", "owner"):
        shown = await _sdk(client, tenant.keys[role]).responses.retrieve(created.id)
        assert SECRET_PART not in shown.model_dump_json(), role
        assert shown.tools[0].headers == {"Authorization": REDACTED}  # type: ignore[union-attr]
        assert shown.tools[1].authorization == REDACTED  # type: ignore[union-attr]
    if background:
        events = [
            event
            async for event in await _sdk(client, tenant.keys["viewer"]).responses.retrieve(created.id, stream=True)
        ]
        assert events
        assert all(SECRET_PART not in event.model_dump_json() for event in events)
    assert SECRET_PART not in await _stored(client)


async def test_redacted_is_no_header_value_a_response_accepts(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    tool = {
        "type": "mcp",
        "server_label": "kb",
        "server_url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": REDACTED},
    }
    answer = await client.post(
        "/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]}, headers=tenant.headers("developer")
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "tools[0].headers.Authorization"
