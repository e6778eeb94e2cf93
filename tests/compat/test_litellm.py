"""LiteLLM's `openai/` provider pointed at Switchyard: chats (streamed and not), tool results, embeddings."""

from __future__ import annotations

import json
import os
from typing import Any

import openai
import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ALIAS = "llama-3.1-8b-instruct"


@pytest.fixture(scope="module")
def litellm() -> Any:
    # No internet here: LiteLLM must use its bundled cost map, and must not try to fetch a Llama tokenizer from
    # the Hugging Face hub (it does for model names with "llama" in them, retrying for ~25 s).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    return litellm


def test_litellm_openai_provider(litellm: Any, live_server: Any) -> None:
    kwargs = {
        "model": f"openai/{MODEL}",
        "api_base": live_server.base_url,
        "api_key": live_server.tenant_key,
        "messages": [{"role": "user", "content": "hello from litellm"}],
        "max_tokens": 6,
        "seed": 11,
    }
    response = litellm.completion(**kwargs)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 6
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(stream=True, **kwargs))
    assert streamed == response.choices[0].message.content


def test_litellm_named_tool_message_on_an_alias(litellm: Any, live_server: Any, api_key: str) -> None:
    """LiteLLM's documented idiom for tool results: a tool message with the tool's ``name``."""
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Please use get_weather city=Paris"}]
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        common = {"model": f"openai/{ALIAS}", "client": sdk, "tools": [weather]}
        first = litellm.completion(messages=messages, **common)
        (call,) = first.choices[0].message.tool_calls
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "name": "get_weather", "content": "sunny, 21 C"})
        second = litellm.completion(messages=messages, max_tokens=20, **common)
    assert second.choices[0].message.content.startswith("Result of get_weather: sunny, 21 C")
    assert second.choices[0].finish_reason == "length"
    assert second.model == MODEL  # the served name, as OpenAI answers an alias with its snapshot


def test_litellm_embedding(litellm: Any, live_server: Any, api_key: str) -> None:
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        response = litellm.embedding(
            model="openai/bge-large-en-v1.5", input=["first text", "second text", "first text"], client=sdk
        )
    vectors = [item["embedding"] for item in response.data]
    assert [len(v) for v in vectors] == [1024] * 3
    assert vectors[0] == vectors[2] != vectors[1]
    assert response.usage.prompt_tokens > 0
    assert response.model == "BAAI/bge-large-en-v1.5"
