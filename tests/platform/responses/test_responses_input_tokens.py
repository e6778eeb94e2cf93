"""POST /v1/responses/input_tokens through the official client: admission's own count of a response's input,
refused as creating the response would be, and never billed."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_the_count_is_the_input_tokens_the_response_is_billed_for(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["owner"])
    fields: dict[str, Any] = {"model": MODEL, "instructions": "Answer briefly.", "input": "How far is the moon?"}
    counted = await sdk.responses.input_tokens.count(**fields)
    assert counted.object == "response.input_tokens"
    assert await _usage(client) == []  # counting runs and bills nothing
    response = await sdk.responses.create(**fields, max_output_tokens=4)
    assert response.usage is not None
    assert counted.input_tokens == response.usage.input_tokens


async def test_the_count_takes_in_the_history_a_response_continues(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["owner"])
    first = await sdk.responses.create(model=MODEL, input="Tell me about the moon.", max_output_tokens=4)
    alone = await sdk.responses.input_tokens.count(model=MODEL, input="And the sun?")
    continued = await sdk.responses.input_tokens.count(model=MODEL, input="And the sun?", previous_response_id=first.id)
    second = await sdk.responses.create(
        model=MODEL, input="And the sun?", previous_response_id=first.id, max_output_tokens=4
    )
    assert second.usage is not None
    assert alone.input_tokens < continued.input_tokens == second.usage.input_tokens


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "no-such-model", "input": "hi"}, 404, "model"),
        ({"input": "hi"}, 400, "model"),
        ({"model": MODEL, "input": "hi", "previous_response_id": "resp_missing"}, 404, "previous_response_id"),
        ({"model": MODEL, "input": "hi", "tools": [{"type": "web_search"}]}, 400, "tools[0].type"),
    ],
)
async def test_a_count_is_refused_as_the_response_would_be(
    client: Any, make_tenant: Any, body: dict[str, Any], status: int, param: str
) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/responses/input_tokens", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == status, refused.text
    assert refused.json()["error"]["param"] == param
