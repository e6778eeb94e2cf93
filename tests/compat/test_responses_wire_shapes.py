"""Every object the Responses and Conversations APIs answer validates against the ``openai`` package's own types
(generated from OpenAI's API description). The client itself never validates (it builds its models without checking),
so a field missing or of the wrong type only surfaces later, in whatever code reads it; here it fails at once."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

import httpx
import pydantic
import pytest
from openai.types.conversations import Conversation, ConversationItem
from openai.types.responses import Response, ResponseItem, ResponseStreamEvent

ALIAS = "llama-3.1-8b-instruct"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _members(union: Any) -> list[Any]:
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        return _members(args[0])
    return [m for a in args for m in _members(a)] if args else [union]


def _literal(model: Any, field: str) -> tuple[Any, ...]:
    info = getattr(model, "model_fields", {}).get(field)
    return typing.get_args(info.annotation) if info is not None else ()


def validate(union: Any, value: dict[str, Any]) -> None:
    """Validate ``value`` as the member of ``union`` its ``type`` (and a message's ``role``) names: one precise error
    instead of one per member."""
    candidates = [m for m in _members(union) if value.get("type") in _literal(m, "type")]
    if value.get("type") == "message":
        candidates = [m for m in candidates if value.get("role") in _literal(m, "role")] or candidates
    assert candidates, f"no {union} has type {value.get('type')!r}"
    pydantic.TypeAdapter(candidates[0]).validate_python(value)


@pytest.fixture
def http(live_server: Any, api_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.base_url, headers={"Authorization": f"Bearer {api_key}"}) as client:
        yield client


def create(http: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = http.post("/responses", json={"model": ALIAS, **body})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def events(http: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    with http.stream("POST", "/responses", json={"model": ALIAS, "stream": True, **body}) as stream:
        return [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]


LIFECYCLE = ("response.created", "response.in_progress", "response.completed", "response.incomplete", "response.failed")


def test_a_text_response(http: httpx.Client) -> None:
    Response.model_validate(create(http, input="Say something", instructions="Answer briefly."))


def test_a_function_call_response(http: httpx.Client) -> None:
    Response.model_validate(create(http, input="Please use get_weather city=Oslo", tools=[WEATHER]))


@pytest.mark.parametrize(
    ("body", "delta", "status"),
    [
        ({"input": "Say something"}, "response.output_text.delta", "completed"),
        ({"input": "get_weather city=Oslo", "tools": [WEATHER]}, "response.function_call_arguments.delta", "completed"),
        ({"input": "hi", "max_output_tokens": 3}, "response.output_text.delta", "incomplete"),
    ],
    ids=["text", "function call", "incomplete"],
)
def test_item_and_delta_events(http: httpx.Client, body: dict[str, Any], delta: str, status: str) -> None:
    """The stream carries the item and delta events this validates and ends as its response did: an empty stream, a
    failed one or one without items would otherwise validate nothing and pass."""
    streamed = events(http, **body)
    types = [event["type"] for event in streamed]
    assert types, "the stream carried no events"
    for failure in ("error", "response.failed"):
        assert failure not in types, types
    for expected in ("response.output_item.added", delta, "response.output_item.done"):
        assert expected in types, f"no {expected} in {types}"
    assert types[-1] == f"response.{status}", types
    assert streamed[-1]["response"]["status"] == status
    for event in streamed:
        if event["type"] not in LIFECYCLE:
            validate(ResponseStreamEvent, event)


@pytest.mark.parametrize(
    "body",
    [
        {"input": "Say something"},
        {"input": "get_weather city=Oslo", "tools": [WEATHER]},
        {"input": "hi", "max_output_tokens": 3},
    ],
    ids=["text", "function call", "incomplete"],
)
def test_lifecycle_events(http: httpx.Client, body: dict[str, Any]) -> None:
    lifecycle = [e for e in events(http, **body) if e["type"] in LIFECYCLE]
    assert len(lifecycle) >= 2
    for event in lifecycle:
        validate(ResponseStreamEvent, event)


def test_input_items(http: httpx.Client) -> None:
    response = create(
        http,
        input=[
            {"role": "user", "content": "Hello there"},
            {"role": "user", "content": [{"type": "input_text", "text": "and you"}]},
        ],
    )
    listed = http.get(f"/responses/{response['id']}/input_items").json()["data"]
    assert len(listed) == 2
    for item in listed:
        validate(ResponseItem, item)


def test_a_conversation_and_its_items(http: httpx.Client) -> None:
    created = http.post("/conversations", json={"items": [{"type": "message", "role": "user", "content": "hi"}]})
    assert created.status_code == 200, created.text
    conversation = Conversation.model_validate(created.json())
    create(http, input="Please use get_weather city=Oslo", tools=[WEATHER], conversation=conversation.id)
    items = http.get(f"/conversations/{conversation.id}/items").json()["data"]
    assert [i["type"] for i in items] == ["function_call", "message", "message"]  # newest first, as OpenAI lists them
    for item in items:
        validate(ConversationItem, item)
