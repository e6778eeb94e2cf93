"""A job's first model call uses the admission taken when the job was created, whichever agent makes it: in a
workflow run the first call is an agent node's, and the API key's request rate is charged for it once (when the
run or response was created), not a second time when the node's agent calls the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.db import TenantScope
from switchyard.platform.limits import tenant_limit_key
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run

REQUESTS_PER_MINUTE = 5  # one request back every 12 s: none comes back while a test runs
FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


@pytest.fixture
def settings(database_url: str, tmp_path: Path, shared_apps: Any) -> Any:
    return shared_apps.settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        key_requests_per_minute=REQUESTS_PER_MINUTE,
    )


async def _workflow(client: Any, tenant: Any, agent_id: str) -> str:
    body = {
        "name": "ask-once",
        "start": "ask",
        "nodes": [
            {"type": "agent", "id": "ask", "agent_id": agent_id, "next": "done"},
            {"type": "end", "id": "done"},
        ],
    }
    created = await client.post("/v1/workflows", json=body, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _requests_left_after_one_more(client: Any, tenant: Any, model: str) -> int:
    """What the developer key has left of its minute's requests once a chat completion took one more."""
    chat = await client.post(
        "/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
        headers=tenant.headers("developer"),
    )
    assert chat.status_code == 200, chat.text
    return int(chat.headers["x-ratelimit-remaining-requests"])


async def _usage(client: Any, tenant: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


@pytest.mark.parametrize("runs", ["workflow", "agent"])
async def test_a_run_takes_one_request_of_its_keys_rate_for_its_one_model_call(
    client: Any, make_tenant: Any, runs: str
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    agent = await make_agent(client, tenant)
    target = await _workflow(client, tenant, agent["id"]) if runs == "workflow" else agent["id"]
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs", json={"agent_id": target, "thread": {"messages": [{"content": "hello"}]}}, headers=headers
    )
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run
    assert len(await _usage(client, tenant)) == 1  # one model call
    # the run's creation took one request (for its one model call), this chat completion another
    assert await _requests_left_after_one_more(client, tenant, agent["model"]) == REQUESTS_PER_MINUTE - 2
    assert client.app.state.gateway.admission.slots.in_flight(tenant_limit_key(tenant.id)) == 0


async def test_a_foreground_workflow_response_takes_one_request_and_gives_its_slot_back(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    agent = await make_agent(client, tenant)
    workflow_id = await _workflow(client, tenant, agent["id"])
    answered = await client.post(
        "/v1/responses",
        json={"model": "any", "prompt": {"id": workflow_id}, "input": "hello"},
        headers=tenant.headers("developer"),
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "completed", answered.json()
    assert len(await _usage(client, tenant)) == 1
    assert await _requests_left_after_one_more(client, tenant, agent["model"]) == REQUESTS_PER_MINUTE - 2
    assert client.app.state.gateway.admission.slots.in_flight(tenant_limit_key(tenant.id)) == 0


async def test_a_response_whose_tools_cannot_be_set_up_gives_its_slot_back(client: Any, make_tenant: Any) -> None:
    """Its agents are resolved after its first call was admitted: a failure there (an MCP server that cannot be
    listed) ends the response with no call made, and what the admission held goes back at once."""
    tenant = await make_tenant()
    unreachable = {"type": "mcp", "server_label": "gone", "server_url": "http://127.0.0.1:9/mcp"}
    agent = await make_agent(client, tenant, tools=[unreachable])
    answered = await client.post(
        "/v1/responses",
        json={"model": "any", "prompt": {"id": agent["id"]}, "input": "hello"},
        headers=tenant.headers("developer"),
    )
    assert answered.status_code == 200, answered.text
    assert (answered.json()["status"], answered.json()["error"]["code"]) == ("failed", "tool_setup_error")
    assert await _usage(client, tenant) == []
    assert client.app.state.gateway.admission.slots.in_flight(tenant_limit_key(tenant.id)) == 0
