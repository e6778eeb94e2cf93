"""/v1/responses and /v1/conversations through the app, driven by the official client: text and items in,
function tools out and back, text.format, chains of responses, conversations, streaming events, background
responses, and the books (one usage event per model call)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ResponseRecord, UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_text_in_text_out_with_usage_compute_and_one_usage_event(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model=MODEL, input="Say hello.", instructions="Be brief.", max_output_tokens=40
    )
    assert response.status in ("completed", "incomplete")
    assert response.object == "response"
    assert response.output_text
    assert response.output[0].type == "message"
    assert response.usage is not None
    assert response.usage.output_tokens > 0
    compute = (response.usage.model_extra or {})["compute"]
    assert compute["chip_us"] > 0
    assert compute["model_calls"] == 1
    events = await _usage(client)
    assert len(events) == 1
    assert events[0].chip_us == compute["chip_us"]
    again = await sdk.responses.retrieve(response.id)
    assert again.output_text == response.output_text
    items = await sdk.responses.input_items.list(response.id)
    assert [i.type for i in items.data] == ["message"]


async def test_function_tool_round_trip_with_previous_response_id(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    first = await sdk.responses.create(model=MODEL, input="Weather in Paris?", tools=[WEATHER], tool_choice="required")
    calls = [item for item in first.output if item.type == "function_call"]
    assert first.status == "completed"
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
    second = await sdk.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21 C"}],
        tools=[WEATHER],
    )
    assert second.status in ("completed", "incomplete")
    assert second.previous_response_id == first.id
    assert second.output_text
    assert len(await _usage(client)) == 2


async def test_text_format_json_schema_answers_schema_valid_json(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    response = await sdk.responses.create(
        model=MODEL,
        input="Invent a person.",
        text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}},
    )
    jsonschema.validate(json.loads(response.output_text), schema)


async def test_conversation_keeps_the_items_of_each_response(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    conversation = await sdk.conversations.create(items=[{"type": "message", "role": "user", "content": "Hi."}])
    first = await sdk.responses.create(model=MODEL, conversation=conversation.id, input="What did I say?")
    second = await sdk.responses.create(model=MODEL, conversation=conversation.id, input="And then?")
    items = await sdk.conversations.items.list(conversation.id, order="asc")
    kinds = [(item.type, getattr(item, "role", None)) for item in items.data]
    assert kinds == [
        ("message", "user"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert items.data[2].id == first.output[0].id
    assert items.data[4].id == second.output[0].id


async def test_streaming_sends_openais_semantic_events_in_order(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    events = [event async for event in await sdk.responses.create(model=MODEL, input="Count to five.", stream=True)]
    names = [event.type for event in events]
    assert names[0] == "response.created"
    assert names[1] == "response.in_progress"
    assert names[-1] in ("response.completed", "response.incomplete")
    assert "response.output_text.delta" in names
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == events[-1].response.output_text


async def test_errors_change_nothing(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.create(model="no-such-model", input="x")
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.create(model=MODEL, input="x", previous_response_id="resp_missing")
    with pytest.raises(openai.BadRequestError) as bad:
        await sdk.responses.create(model=MODEL, input=[{"type": "wat"}])
    assert bad.value.body["param"] == "input[0].type"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        await sdk.responses.create(model=MODEL, input="x", tools=[{"type": "web_search"}])
    assert await _usage(client) == []


async def test_a_budget_refuses_a_response_before_anything_is_stored(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 1, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code in (200, 201), budget.text
    sdk = _sdk(client, tenant.keys["developer"])
    with pytest.raises(openai.APIStatusError) as refused:
        await sdk.responses.create(model=MODEL, input="Write a long essay.", max_output_tokens=4000)
    assert refused.value.status_code == 402
    assert refused.value.code == "budget_exceeded"
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert (await session.execute(select(ResponseRecord))).scalars().all() == []
    assert await _usage(client) == []
