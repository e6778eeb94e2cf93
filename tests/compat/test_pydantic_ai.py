"""pydantic-ai against a real Switchyard server: an ``Agent`` on ``OpenAIChatModel`` with a provider pointed at the
server, calling a tool and answering with structured output (tool output and native JSON-schema output)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput, ToolOutput
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

ALIAS = "llama-3.1-8b-instruct"


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
async def provider(live_server: Any, api_key: str) -> AsyncIterator[OpenAIProvider]:
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield OpenAIProvider(openai_client=sdk)


def weather_agent(model: Any, output_type: Any = str) -> tuple[Agent[None, Any], list[str]]:
    asked: list[str] = []
    agent = Agent(model, instructions="Answer the user's question.", output_type=output_type)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        asked.append(city)
        return f"sunny, 21 C in {city}"

    return agent, asked


def tool_calls(messages: list[Any]) -> list[ToolCallPart]:
    return [p for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)]


async def test_an_agent_calls_its_tool_and_answers_with_the_result(provider: OpenAIProvider) -> None:
    agent, asked = weather_agent(OpenAIChatModel(ALIAS, provider=provider))
    result = await agent.run("Please use get_weather city=Paris")
    assert asked == ["Paris"]
    returns = [p for m in result.all_messages() for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns] == ["sunny, 21 C in Paris"]
    assert result.output.startswith("Result of get_weather: sunny, 21 C in Paris")
    assert result.usage.output_tokens > 0


async def test_tool_output_gives_a_validated_object(provider: OpenAIProvider) -> None:
    agent = Agent(OpenAIChatModel(ALIAS, provider=provider), output_type=ToolOutput(CalendarEvent, name="event"))
    result = await agent.run("Alice and Bob meet in Oslo on Monday.")
    assert isinstance(result.output, CalendarEvent)
    (call,) = tool_calls(result.all_messages())
    assert call.tool_name == "event"
    assert CalendarEvent.model_validate(call.args_as_dict()) == result.output


async def test_native_output_after_a_tool_call(provider: OpenAIProvider) -> None:
    agent, asked = weather_agent(OpenAIChatModel(ALIAS, provider=provider), NativeOutput(CalendarEvent))
    result = await agent.run("Check get_weather city=Oslo, then plan the meeting.")
    assert asked == ["Oslo"]
    assert isinstance(result.output, CalendarEvent)
    final = result.all_messages()[-1]
    assert isinstance(final, ModelResponse)
    assert CalendarEvent.model_validate_json(final.text or "") == result.output


async def test_a_plain_pydantic_output_type(provider: OpenAIProvider) -> None:
    """``output_type=Model`` alone: pydantic-ai's default for a model class is a tool output."""
    agent = Agent(OpenAIChatModel(ALIAS, provider=provider), output_type=CalendarEvent)
    result = await agent.run("Alice and Bob meet in Oslo on Monday.")
    assert isinstance(result.output, CalendarEvent)
    assert [c.tool_name for c in tool_calls(result.all_messages())] == ["final_result"]


async def test_streamed_native_output(provider: OpenAIProvider) -> None:
    agent = Agent(OpenAIChatModel(ALIAS, provider=provider), output_type=NativeOutput(CalendarEvent))
    async with agent.run_stream("Alice and Bob meet in Oslo on Monday.") as streamed:
        output = await streamed.get_output()
    assert isinstance(output, CalendarEvent)
