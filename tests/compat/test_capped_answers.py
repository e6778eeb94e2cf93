"""Clients that set an output cap against a real Switchyard server: the sim model stops on its own below the cap,
as a model does, so the helpers that treat a cut answer as an error (the ``openai`` SDK's stream and parse helpers,
openai-agents) finish; ``ignore_eos`` (vLLM's extension, what benchmark clients send) still asks for the whole cap.
And JSON Schema ``pattern``s are honoured, so ``parse`` validates."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from agents.models import _openai_shared
from pydantic import BaseModel, Field

from agents import Agent, ModelSettings, Runner, function_tool, set_default_openai_client, set_tracing_disabled

ALIAS = "llama-3.1-8b-instruct"
CAP = 200
QUESTION = "Describe how the fleet batches requests."


@pytest.fixture
def client(live_server: Any, api_key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def default_client(live_server: Any, api_key: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """openai-agents' process-wide client for the test (the one before it is put back after it)."""
    before = _openai_shared.get_default_openai_client()
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        set_default_openai_client(sdk, use_for_tracing=False)
        set_tracing_disabled(True)
        try:
            yield sdk
        finally:
            _openai_shared.set_default_openai_client(before)  # type: ignore[arg-type]


def test_a_capped_chat_stream_ends_with_a_final_completion(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": QUESTION}]
    usage: Any = {"include_usage": True}
    with client.chat.completions.stream(model=ALIAS, messages=messages, max_tokens=CAP, stream_options=usage) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()  # raised LengthFinishReasonError when every capped answer was cut
    choice = final.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.content == "".join(deltas)
    assert final.usage is not None
    assert 0 < final.usage.completion_tokens < CAP


def test_ignore_eos_writes_the_whole_cap(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": QUESTION}]
    stopped = client.chat.completions.create(model=ALIAS, messages=messages, max_tokens=CAP)
    forced = client.chat.completions.create(
        model=ALIAS, messages=messages, max_tokens=CAP, extra_body={"ignore_eos": True}
    )
    assert stopped.choices[0].finish_reason == "stop"
    assert forced.choices[0].finish_reason == "length"
    assert forced.usage is not None
    assert forced.usage.completion_tokens == CAP
    at_least = client.chat.completions.create(
        model=ALIAS, messages=messages, max_tokens=CAP, extra_body={"min_tokens": CAP - 10}
    )
    assert at_least.usage is not None
    assert at_least.usage.completion_tokens >= CAP - 10


def test_a_capped_responses_stream_completes(client: openai.OpenAI) -> None:
    with client.responses.stream(model=ALIAS, input=QUESTION, max_output_tokens=CAP) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()  # "Didn't receive a response.completed event" when it was cut
    assert kinds[-1] == "response.completed"
    assert final.status == "completed"
    assert final.output_text
    assert final.usage is not None
    assert 0 < final.usage.output_tokens < CAP


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^\d{5}$")
    country: str = Field(pattern=r"^[A-Z]{2}$")


def test_parse_honours_field_patterns(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model=ALIAS,
        messages=[{"role": "user", "content": "Where is the office?"}],
        response_format=Address,
        max_tokens=CAP,
    )
    address = completion.choices[0].message.parsed
    assert address is not None
    assert re.fullmatch(r"\d{5}", address.zip_code)
    assert re.fullmatch(r"[A-Z]{2}", address.country)


@function_tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny, 21 C in {city}"


@pytest.mark.usefixtures("default_client")
async def test_openai_agents_with_max_tokens_completes() -> None:
    settings = ModelSettings(max_tokens=CAP)
    agent = Agent(name="assistant", instructions="Answer briefly.", model=ALIAS, model_settings=settings)
    result = await Runner.run(agent, QUESTION)
    assert isinstance(result.final_output, str)
    assert result.final_output
    with_tool = Agent(
        name="assistant", instructions="Answer briefly.", model=ALIAS, tools=[get_weather], model_settings=settings
    )
    result = await Runner.run(with_tool, "Use get_weather for Oslo.")
    assert "Result of get_weather: sunny, 21 C in" in result.final_output
