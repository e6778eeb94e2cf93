"""The official `openai` package as a real client of Switchyard: one `base_url` change, nothing else."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ALIAS = "llama-3.1-8b-instruct"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}


@pytest.fixture
def client(live_server: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live_server.base_url, api_key=live_server.tenant_key, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def own_client(live_server: Any, api_key: str) -> Iterator[openai.OpenAI]:
    """A client of a tenant of the test's own (requests without max_tokens spend a shared tenant's token allowance)."""
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def async_client(live_server: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=live_server.tenant_key, max_retries=0) as sdk:
        yield sdk


def test_models_list(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert MODEL in ids
    assert client.models.retrieve(MODEL).id == MODEL


def test_chat_completion_with_usage_and_compute(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say something"}], max_tokens=20, seed=7
    )
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert response.usage is not None
    assert response.usage.completion_tokens == 20
    assert response.usage.prompt_tokens > 0
    assert response.usage.total_tokens == response.usage.prompt_tokens + 20
    compute = response.usage.model_extra["compute"]
    assert compute["chip_us"] > 0
    assert compute["instance_type"] == "trn2.48xlarge"
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "again"}], max_tokens=3
    )
    assert int(raw.headers["x-switchyard-chip-us"]) > 0
    assert raw.headers["x-request-id"]
    assert int(raw.headers["x-ratelimit-remaining-requests"]) >= 0


def test_streaming_matches_the_non_streamed_answer(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "stream"}], "max_tokens": 25}
    whole = client.chat.completions.create(seed=3, **kwargs)
    chunks = list(client.chat.completions.create(seed=3, stream=True, stream_options={"include_usage": True}, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 25
    assert len({c.id for c in chunks}) == 1


def test_tool_call_round_trip(client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Please use get_weather city=Paris"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    assert first.choices[0].finish_reason == "tool_calls"
    (call,) = first.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"})
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER], max_tokens=30)
    assert second.choices[0].finish_reason == "length"
    assert (second.choices[0].message.content or "").startswith("Result of get_weather: 18 degrees and sunny")


def test_streamed_tool_call(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "get_weather city=Oslo please"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        stream=True,
    )
    name, arguments, call_id, finish = "", "", None, None
    for chunk in stream:
        if not chunk.choices:
            continue
        for delta in chunk.choices[0].delta.tool_calls or []:
            assert delta.index == 0
            call_id = delta.id or call_id
            name += (delta.function.name or "") if delta.function else ""
            arguments += (delta.function.arguments or "") if delta.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert call_id
    assert name == "get_weather"
    assert json.loads(arguments)["city"] == "Oslo"
    assert finish == "tool_calls"


async def test_async_client(async_client: openai.AsyncOpenAI) -> None:
    response = await async_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_completion_tokens=4
    )
    assert response.usage is not None
    assert response.usage.completion_tokens == 4
    stream = await async_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
    )
    pieces = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 4


def test_errors_surface_as_the_sdks_exceptions(live_server: Any, client: openai.OpenAI) -> None:
    with (
        openai.OpenAI(base_url=live_server.base_url, api_key="sy_000000000000_" + "x" * 43, max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError),
    ):
        bad.models.list()
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=10**6)
    assert too_long.value.param == "max_tokens"
    with pytest.raises(openai.BadRequestError) as wrong:
        client.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "x"}])  # type: ignore[misc,list-item]
    assert "role" in str(wrong.value)


def test_rate_limit_surfaces_as_rate_limit_error(live_server: Any) -> None:
    # 200,000 tokens per minute: a request of some 120,000 prompt tokens fits, a second one right after it does not
    # (the allowance comes back at 3,333 tokens a second: 12 s; twelve 16,000-token requests left 2.4 s, which a
    # loaded machine spent before the thirteenth was sent).
    messages = [{"role": "user", "content": "x " * 120_000}]
    key = live_server.new_tenant_key()
    with openai.OpenAI(base_url=live_server.base_url, api_key=key, max_retries=0) as client:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1)  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError) as limited:
            client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1)  # type: ignore[arg-type]
    assert limited.value.code == "tokens_per_minute_exceeded"
    assert int(limited.value.response.headers["retry-after"]) >= 1


def test_streamed_completion_with_an_idempotency_key_streams_whole_and_replays(live_server: Any) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {live_server.tenant_key}", "Idempotency-Key": "stream-once"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 12, "stream": True}
    with httpx.Client(base_url=live_server.base_url) as http:
        first = http.post("/chat/completions", json=body, headers=headers)
        again = http.post("/chat/completions", json=body, headers=headers)
    events = [line for line in first.text.splitlines() if line.startswith("data:")]
    assert events[-1] == "data: [DONE]"
    assert sum('"content":"' in e for e in events) >= 12  # the role chunk's empty content plus 12 tokens
    assert again.headers["idempotent-replayed"] == "true"
    assert again.text == first.text


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


def test_parse_with_a_pydantic_model(own_client: openai.OpenAI) -> None:
    completion = own_client.chat.completions.parse(
        model=ALIAS,
        messages=[{"role": "user", "content": "Alice and Bob meet in Oslo on Monday."}],
        response_format=CalendarEvent,
    )
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, CalendarEvent)
    assert message.parsed == CalendarEvent.model_validate_json(message.content or "")
    assert completion.model == MODEL


def test_parse_a_tool_call_with_a_pydantic_tool(own_client: openai.OpenAI) -> None:
    completion = own_client.chat.completions.parse(
        model=ALIAS,
        messages=[{"role": "user", "content": "Put it in the calendar: Alice and Bob, Monday."}],
        tools=[openai.pydantic_function_tool(CalendarEvent)],
        tool_choice="required",
    )
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "CalendarEvent"
    assert isinstance(call.function.parsed_arguments, CalendarEvent)


def test_embeddings_create(own_client: openai.OpenAI) -> None:
    texts = ["first text", "second text", "first text"]
    response = own_client.embeddings.create(model="bge-large-en-v1.5", input=texts)  # base64, the client's default
    vectors = [item.embedding for item in response.data]
    assert [item.index for item in response.data] == [0, 1, 2]
    assert [len(v) for v in vectors] == [1024] * 3
    assert vectors[0] == vectors[2] != vectors[1]
    assert sum(x * x for x in vectors[0]) == pytest.approx(1.0, abs=1e-5)
    as_floats = own_client.embeddings.create(model="bge-large-en-v1.5", input=texts[:1], encoding_format="float")
    assert as_floats.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
    assert response.model == "BAAI/bge-large-en-v1.5"
    assert response.usage.prompt_tokens == response.usage.total_tokens > 0
    cut = own_client.embeddings.create(model="qwen3-embedding-8b", input="short", dimensions=64)
    assert len(cut.data[0].embedding) == 64
