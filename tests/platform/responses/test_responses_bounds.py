"""Numbers and ids a tenant sends that the database cannot hold are refused with a 400 naming them, on SQLite and
PostgreSQL alike (they answered 500: an agent version past the integer column, an item id past its 128 characters).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ConversationItem, ResponseRecord

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def _agent(client: Any, headers: dict[str, str]) -> str:
    agent = await client.post("/v1/agents", json={"name": "bounds", "model": MODEL}, headers=headers)
    assert agent.status_code == 201, agent.text
    return str(agent.json()["id"])


@pytest.mark.parametrize("version", ["2147483648", "99999999999999999999", "9" * 5000, "²", "٣", "+1", " 1", "-1"])
async def test_a_prompt_version_the_database_cannot_hold_is_400_naming_it(
    client: Any, make_tenant: Any, version: str
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent_id = await _agent(client, headers)
    body = {"model": MODEL, "prompt": {"id": agent_id, "version": version}, "input": "x"}
    refused = await client.post("/v1/responses", json=body, headers=headers)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "prompt.version"
    largest = {**body, "prompt": {"id": agent_id, "version": "2147483647"}}
    missing = await client.post("/v1/responses", json=largest, headers=headers)
    assert missing.status_code == 404, missing.text  # in range, but the agent has no such version
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(select(ResponseRecord))).scalars().all() == []


async def test_a_conversation_item_id_over_128_characters_is_400_naming_it(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    conversation = await client.post("/v1/conversations", json={}, headers=headers)
    conversation_id = conversation.json()["id"]
    item = {"type": "message", "role": "user", "content": "Hello.", "id": "m" * 129}
    added = await client.post(f"/v1/conversations/{conversation_id}/items", json={"items": [item]}, headers=headers)
    assert added.status_code == 400, added.text
    assert added.json()["error"]["param"] == "items[0].id"
    created = await client.post("/v1/conversations", json={"items": [item]}, headers=headers)
    assert created.status_code == 400, created.text
    assert created.json()["error"]["param"] == "items[0].id"
    body = {"model": MODEL, "conversation": conversation_id, "input": [item]}
    responded = await client.post("/v1/responses", json=body, headers=headers)
    assert responded.status_code == 400, responded.text
    assert responded.json()["error"]["param"] == "input[0].id"
    fits = {**item, "id": "m" * 128}
    added = await client.post(f"/v1/conversations/{conversation_id}/items", json={"items": [fits]}, headers=headers)
    assert added.status_code == 200, added.text
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert [row.id for row in (await session.execute(select(ConversationItem))).scalars()] == ["m" * 128]


async def test_max_output_tokens_past_the_platforms_cap_is_400_naming_it(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "input": "x", "max_output_tokens": 10**30}
    refused = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["param"], error["code"]) == ("max_output_tokens", "invalid_value")
    assert error["message"].startswith("max_output_tokens is 1000000000000000000000000000000;")


async def test_an_include_value_openai_does_not_define_is_400_naming_include(client: Any, make_tenant: Any) -> None:
    """``include`` names OpenAI's includable values only (schemathesis sent ``?include=true`` to a response's
    input items and got 200)."""
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    refused = await client.post(
        "/v1/responses", json={"model": MODEL, "input": "x", "include": ["true"]}, headers=headers
    )
    assert refused.status_code == 400, refused.text
    assert "include" in refused.text
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(select(ResponseRecord))).scalars().all() == []
    created = await client.post(
        "/v1/responses",
        json={"model": MODEL, "input": "x", "max_output_tokens": 4, "include": ["reasoning.encrypted_content"]},
        headers=headers,
    )
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    for path in (f"/v1/responses/{response_id}", f"/v1/responses/{response_id}/input_items"):
        assert (await client.get(path, params={"include": "true"}, headers=headers)).status_code == 400
        answered = await client.get(path, params={"include": "file_search_call.results"}, headers=headers)
        assert answered.status_code == 200, answered.text
