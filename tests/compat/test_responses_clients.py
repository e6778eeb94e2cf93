"""The Responses API through agent frameworks against a real Switchyard server: pydantic-ai's
``OpenAIResponsesModel``, LangChain's ``ChatOpenAI(use_responses_api=True)`` and LiteLLM's ``responses()``; the first
two also run an agent defined in Switchyard through OpenAI's reusable-prompt reference (``prompt``, sent as an extra
body field)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import httpx
import httpx2
import openai
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput, ToolOutput
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

ALIAS = "llama-3.1-8b-instruct"
SERVED = "meta-llama/Llama-3.1-8B-Instruct"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture
def adder_agent_id(live_server: Any, api_key: str) -> str:
    """An agent defined in Switchyard (instructions, a model, the server-side calculator), for OpenAI's
    reusable-prompt reference."""
    created = httpx.post(
        f"{live_server.base_url}/agents",
        json={"name": "adder", "model": ALIAS, "instructions": "You add numbers.", "tools": [{"type": "calculator"}]},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    """A meeting to put in the calendar."""

    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


# pydantic-ai


@pytest.fixture
async def responses_model(live_server: Any, api_key: str) -> AsyncIterator[OpenAIResponsesModel]:
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield OpenAIResponsesModel(ALIAS, provider=OpenAIProvider(openai_client=sdk))


def weather_agent(model: Any, output_type: Any = str) -> tuple[Agent[None, Any], list[str]]:
    asked: list[str] = []
    agent = Agent(model, instructions="Answer the user's question.", output_type=output_type)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        asked.append(city)
        return f"sunny, 21 C in {city}"

    return agent, asked


async def test_pydantic_ai_responses_model_with_a_tool(responses_model: OpenAIResponsesModel) -> None:
    agent, asked = weather_agent(responses_model)
    result = await agent.run("Please use get_weather city=Paris")
    assert asked == ["Paris"]
    assert result.output.startswith("Result of get_weather: sunny, 21 C in Paris")
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert len(responses) == 2
    assert all((r.provider_response_id or "").startswith("resp_") for r in responses)


async def test_pydantic_ai_responses_model_native_output_after_a_tool(responses_model: OpenAIResponsesModel) -> None:
    agent, asked = weather_agent(responses_model, NativeOutput(CalendarEvent))
    result = await agent.run("Check get_weather city=Oslo, then plan the meeting.")
    assert asked == ["Oslo"]
    assert isinstance(result.output, CalendarEvent)


async def test_pydantic_ai_responses_model_tool_output(responses_model: OpenAIResponsesModel) -> None:
    agent = Agent(responses_model, output_type=ToolOutput(CalendarEvent, name="event"))
    result = await agent.run("Alice and Bob meet in Oslo on Monday.")
    assert isinstance(result.output, CalendarEvent)


async def test_pydantic_ai_responses_model_streams(responses_model: OpenAIResponsesModel) -> None:
    agent = Agent(responses_model, instructions="Answer briefly.")
    async with agent.run_stream("Say something") as streamed:
        # each delta as it comes (by default pydantic-ai joins those less than 0.1 s apart: timing, not the server)
        pieces = [piece async for piece in streamed.stream_text(delta=True, debounce_by=None)]
    assert len(pieces) > 1
    assert "".join(pieces) == await streamed.get_output()


async def test_pydantic_ai_openai_model_string_is_the_responses_model(
    live_server: Any, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Agent("openai:<model>")`` as pydantic-ai's docs write it, configured by OpenAI's environment variables."""
    monkeypatch.setenv("OPENAI_BASE_URL", live_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", api_key)
    agent, asked = weather_agent(f"openai:{ALIAS}", NativeOutput(CalendarEvent))
    assert isinstance(agent.model, OpenAIResponsesModel)
    async with agent:  # closes the connections of the client the provider made
        result = await agent.run("Check get_weather city=Oslo, then plan the meeting.")
    assert asked == ["Oslo"]
    assert isinstance(result.output, CalendarEvent)


async def test_pydantic_ai_runs_a_switchyard_agent_as_the_prompt(
    responses_model: OpenAIResponsesModel, adder_agent_id: str
) -> None:
    agent = Agent(responses_model, model_settings={"extra_body": {"prompt": {"id": adder_agent_id}}})
    result = await agent.run("Please use calculator expression=2+3")
    assert result.output.startswith('Result of calculator: {"result": 5}')


# LangChain


@pytest.fixture
def responses_chat(live_server: Any, api_key: str) -> Iterator[ChatOpenAI]:
    with httpx2.Client() as http:
        yield ChatOpenAI(
            model=ALIAS,
            base_url=live_server.base_url,
            api_key=api_key,
            max_retries=0,
            http_client=http,
            use_responses_api=True,
        )


def test_langchain_responses_api_text(responses_chat: ChatOpenAI) -> None:
    answer = responses_chat.invoke("Say something")
    assert str(answer.id).startswith("resp_")
    assert answer.text
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["output_tokens"] > 0
    streamed = "".join(chunk.text for chunk in responses_chat.stream("Say something"))
    assert streamed


def test_langchain_responses_api_tool_round_trip(responses_chat: ChatOpenAI) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return f"sunny, 21 C in {city}"

    bound = responses_chat.bind_tools([get_weather])
    messages: list[Any] = [HumanMessage("Please use get_weather city=Paris")]
    first = bound.invoke(messages)
    (call,) = first.tool_calls
    assert call["name"] == "get_weather"
    assert call["args"] == {"city": "Paris"}
    messages += [first, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    second = bound.invoke(messages)
    assert second.text.startswith("Result of get_weather: sunny, 21 C in Paris")


def test_langchain_responses_api_structured_output(responses_chat: ChatOpenAI) -> None:
    result: Any = responses_chat.with_structured_output(CalendarEvent, include_raw=True).invoke(
        "Alice and Bob meet in Oslo on Monday."
    )
    assert result["parsing_error"] is None
    assert isinstance(result["parsed"], CalendarEvent)


def test_langchain_runs_a_switchyard_agent_as_the_prompt(responses_chat: ChatOpenAI, adder_agent_id: str) -> None:
    answer = responses_chat.invoke("Please use calculator expression=2+3", prompt={"id": adder_agent_id})
    assert answer.text.startswith('Result of calculator: {"result": 5}')


# LiteLLM


@pytest.fixture(scope="module")
def litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no internet here (see test_litellm.py)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    return litellm


def test_litellm_responses(litellm: Any, live_server: Any, api_key: str) -> None:
    common = {"model": f"openai/{ALIAS}", "api_base": live_server.base_url, "api_key": api_key}
    first = litellm.responses(input="Please use get_weather city=Paris", tools=[WEATHER], **common)
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    second = litellm.responses(
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}],
        previous_response_id=first.id,
        tools=[WEATHER],
        **common,
    )
    (message,) = second.output
    assert message.content[0].text.startswith("Result of get_weather: sunny, 21 C")
    assert second.usage.output_tokens > 0
    events = list(litellm.responses(input="Say something", stream=True, **common))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[0].content[0].text == deltas
