"""The official ``openai`` client's Responses and Conversations APIs against a real Switchyard server, checked against
the shapes OpenAI documents: text and item input, chained responses (``previous_response_id``), conversations,
semantic stream events, function calls and their outputs, and ``text.format`` json_schema (``responses.parse``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel

ALIAS = "llama-3.1-8b-instruct"
SERVED = "meta-llama/Llama-3.1-8B-Instruct"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


@pytest.fixture
def client(live_server: Any, api_key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield sdk


def function_calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


def test_text_input_gives_a_completed_message(client: openai.OpenAI) -> None:
    response = client.responses.create(model=ALIAS, input="Say something", instructions="Answer briefly.")
    assert response.object == "response"
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.model == SERVED
    assert response.instructions == "Answer briefly."
    (message,) = response.output
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.status == "completed"
    (part,) = message.content
    assert part.type == "output_text"
    assert part.text
    assert response.output_text == part.text
    assert response.usage is not None
    assert response.usage.output_tokens > 0
    assert response.usage.input_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.usage.model_extra is not None
    assert response.usage.model_extra["compute"]["chip_us"] > 0


def test_max_output_tokens_makes_the_response_incomplete(client: openai.OpenAI) -> None:
    response = client.responses.create(model=ALIAS, input="Say something", max_output_tokens=16)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None
    assert response.usage.output_tokens == 16
    assert response.output_text


def test_retrieve_list_input_items_and_delete(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=ALIAS, input=[{"role": "user", "content": "Hello there"}], metadata={"team": "search"}
    )
    again = client.responses.retrieve(response.id)
    assert again.id == response.id
    assert again.output_text == response.output_text
    assert again.metadata == {"team": "search"}
    items = list(client.responses.input_items.list(response.id))
    assert [(i.type, i.role) for i in items] == [("message", "user")]
    deleted = client.responses.delete(response.id)
    assert deleted is None  # the client reads no body; the status said 2xx
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_a_function_call_and_its_output_through_previous_response_id(client: openai.OpenAI) -> None:
    first = client.responses.create(model=ALIAS, input="Please use get_weather city=Paris", tools=[WEATHER])
    (call,) = function_calls(first)
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id
    assert first.status == "completed"
    second = client.responses.create(
        model=ALIAS,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}],
        tools=[WEATHER],
    )
    assert second.previous_response_id == first.id
    # The sim quotes a tool result with the name of the call it answers: the name is in the first response only.
    assert second.output_text.startswith("Result of get_weather: sunny, 21 C")


def test_an_unknown_previous_response_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises((openai.NotFoundError, openai.BadRequestError)) as refused:
        client.responses.create(model=ALIAS, input="hi", previous_response_id="resp_" + "0" * 32)
    assert refused.value.param == "previous_response_id"  # type: ignore[attr-defined]


def test_a_conversation_keeps_the_turns(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Remember: my city is Oslo."}], metadata={"k": "v"}
    )
    assert conversation.id.startswith("conv_")
    assert conversation.metadata == {"k": "v"}
    first = client.responses.create(
        model=ALIAS, conversation=conversation.id, input="Please use get_weather city=Oslo", tools=[WEATHER]
    )
    (call,) = function_calls(first)
    second = client.responses.create(
        model=ALIAS,
        conversation=conversation.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snow, -3 C"}],
        tools=[WEATHER],
    )
    assert second.output_text.startswith("Result of get_weather: snow, -3 C")
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    kinds = [(item.type, getattr(item, "role", None)) for item in items]
    assert kinds == [
        ("message", "user"),
        ("message", "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
    ]
    assert items[2].call_id == call.call_id
    assert items[4].content[0].text == second.output_text
    assert client.conversations.retrieve(conversation.id).id == conversation.id


def test_streaming_events_in_openais_order(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model=ALIAS, input="Stream something", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(numbers[0], numbers[0] + len(events)))  # one event after another, none left out
    text_events = [t for t in types if t not in ("response.created", "response.in_progress", "response.completed")]
    assert text_events[:2] == ["response.output_item.added", "response.content_part.added"]
    assert text_events[-3:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert set(text_events[2:-3]) == {"response.output_text.delta"}
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    (done,) = [e for e in events if e.type == "response.output_text.done"]
    final = events[-1].response
    assert deltas == done.text == final.output_text
    assert final.status == "completed"
    assert final.usage is not None
    assert final.usage.output_tokens > 0
    assert events[0].response.status in ("queued", "in_progress")
    assert client.responses.retrieve(final.id).output_text == final.output_text


def test_stream_helper_and_streamed_function_call(client: openai.OpenAI) -> None:
    with client.responses.stream(model=ALIAS, input="get_weather city=Bergen please", tools=[WEATHER]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types
    (done,) = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert json.loads(done.arguments) == {"city": "Bergen"}
    (call,) = function_calls(final)
    assert call.arguments == done.arguments
    assert call.name == "get_weather"


def test_parse_with_text_format_json_schema(client: openai.OpenAI) -> None:
    response = client.responses.parse(
        model=ALIAS, input="Alice and Bob meet in Oslo on Monday.", text_format=CalendarEvent
    )
    assert isinstance(response.output_parsed, CalendarEvent)
    assert response.output_parsed == CalendarEvent.model_validate_json(response.output_text)
    assert response.text.format is not None
    assert response.text.format.type == "json_schema"


def test_json_object_format(client: openai.OpenAI) -> None:
    response = client.responses.create(model=ALIAS, input="Answer in JSON.", text={"format": {"type": "json_object"}})
    assert isinstance(json.loads(response.output_text), dict)


def test_a_streamed_response_cut_by_max_output_tokens_ends_incomplete(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model=ALIAS, input="Stream something", max_output_tokens=8, stream=True))
    assert events[-1].type == "response.incomplete"
    final = events[-1].response
    assert final.status == "incomplete"
    assert final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens"
    assert sum(e.type == "response.output_text.delta" for e in events) == 8


def test_a_background_response_completes_and_its_stream_resumes(client: openai.OpenAI) -> None:
    started = client.responses.create(model=ALIAS, input="Say something", background=True, max_output_tokens=12)
    assert started.background is True
    response = started
    for _ in range(6000):  # polled as OpenAI tells clients to (it runs on the server); at most 2 minutes
        if response.status not in ("queued", "in_progress"):
            break
        time.sleep(0.02)
        response = client.responses.retrieve(started.id)
    assert response.status == "incomplete"
    assert response.usage is not None
    assert response.usage.output_tokens == 12
    events = list(client.responses.retrieve(started.id, stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.incomplete"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == response.output_text
    after = events[3].sequence_number
    resumed = list(client.responses.retrieve(started.id, stream=True, starting_after=after))
    assert [(e.type, e.sequence_number) for e in resumed] == [(e.type, e.sequence_number) for e in events[4:]]


def test_cancel_a_finished_background_response_is_refused(client: openai.OpenAI) -> None:
    """Only a background response still running can be cancelled; a finished one answers 400 (OpenAI's rule)."""
    done = client.responses.create(model=ALIAS, input="hi", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(done.id)


def test_input_items_in_openais_shape(client: openai.OpenAI) -> None:
    """OpenAI lists an input message with its content as parts (input_text), whatever shape it was sent in."""
    response = client.responses.create(model=ALIAS, input=[{"role": "user", "content": "Hello there"}])
    (item,) = client.responses.input_items.list(response.id)
    assert item.type == "message"
    assert item.id
    assert [(part.type, part.text) for part in item.content] == [("input_text", "Hello there")]
