"""tool_choice "required" after a tool result, as pydantic-ai sends it for an output tool: the sim calls the tool
not yet called this turn (the output tool), so `ToolOutput` works beside function tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from pydantic_ai import ToolOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.compat.test_pydantic_ai import ALIAS, CalendarEvent, weather_agent


@pytest.fixture
async def provider(live_server: Any, api_key: str) -> AsyncIterator[OpenAIProvider]:
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        yield OpenAIProvider(openai_client=sdk)


async def test_tool_output_after_a_function_tool(provider: OpenAIProvider) -> None:
    """pydantic-ai sends tool_choice "required" (text is not an output); after the tool result the sim writes text."""
    agent, asked = weather_agent(OpenAIChatModel(ALIAS, provider=provider), ToolOutput(CalendarEvent))
    result = await agent.run("Check get_weather city=Oslo, then plan the meeting.")
    assert asked == ["Oslo"]
    assert isinstance(result.output, CalendarEvent)


def test_chat_completion_honours_required_after_a_tool_result(live_server: Any, api_key: str) -> None:
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    final = {
        "type": "function",
        "function": {
            "name": "final_result",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
        },
    }
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as client:
        completion = client.chat.completions.create(
            model=ALIAS,
            messages=[
                {"role": "user", "content": "weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ],
            tools=[weather, final],
            tool_choice="required",
        )
    assert completion.choices[0].finish_reason == "tool_calls"  # "required": the model must call a tool
