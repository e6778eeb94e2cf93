"""LangChain's ``ChatOpenAI`` and ``OpenAIEmbeddings`` against a real Switchyard server: ``base_url`` and the key,
nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx2
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel

ALIAS = "llama-3.1-8b-instruct"
EMBEDDING = "bge-large-en-v1.5"


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


@pytest.fixture
def chat(live_server: Any, api_key: str) -> Iterator[ChatOpenAI]:
    # A connection pool of the test's own, closed after it (LangChain's default one is shared and never closed).
    with httpx2.Client() as http:
        yield ChatOpenAI(model=ALIAS, base_url=live_server.base_url, api_key=api_key, max_retries=0, http_client=http)


def test_default_structured_output_is_a_validated_object(chat: ChatOpenAI) -> None:
    """``with_structured_output`` defaults to OpenAI's ``json_schema`` response format."""
    structured = chat.with_structured_output(CalendarEvent, include_raw=True)
    result: Any = structured.invoke("Alice and Bob meet in Oslo on Monday.")
    assert result["parsing_error"] is None
    assert isinstance(result["parsed"], CalendarEvent)
    raw = result["raw"]
    assert isinstance(raw, AIMessage)
    assert raw.tool_calls == []
    assert CalendarEvent.model_validate_json(str(raw.content)) == result["parsed"]
    assert raw.response_metadata["finish_reason"] == "stop"


def test_structured_output_by_function_calling(chat: ChatOpenAI) -> None:
    structured = chat.with_structured_output(CalendarEvent, method="function_calling", include_raw=True)
    result: Any = structured.invoke("Alice and Bob meet in Oslo on Monday.")
    assert isinstance(result["parsed"], CalendarEvent)
    (call,) = result["raw"].tool_calls
    assert call["name"] == "CalendarEvent"
    assert CalendarEvent.model_validate(call["args"]) == result["parsed"]


# LangChain model_dump()s the openai client's parsed stream events, whose `parsed` field pydantic expects to be None:
# a warning raised inside the two client libraries, whatever server answers.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_structured_output_streams(chat: ChatOpenAI) -> None:
    chunks = list(chat.with_structured_output(CalendarEvent).stream("Alice and Bob meet in Oslo on Monday."))
    assert isinstance(chunks[-1], CalendarEvent)


def test_a_bound_tool_round_trip(chat: ChatOpenAI) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return f"sunny, 21 C in {city}"

    bound = chat.bind_tools([get_weather])
    messages: list[Any] = [HumanMessage("Please use get_weather city=Paris")]
    first = bound.invoke(messages)
    (call,) = first.tool_calls
    assert call["name"] == "get_weather"
    assert call["args"] == {"city": "Paris"}
    messages += [first, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    second = bound.invoke(messages, max_tokens=30)
    assert str(second.content).startswith("Result of get_weather: sunny, 21 C in Paris")
    assert second.usage_metadata is not None
    assert second.usage_metadata["output_tokens"] == 30


def test_embeddings(live_server: Any, api_key: str) -> None:
    # No internet here: LangChain would fetch a tiktoken encoding to cut long inputs into chunks; Switchyard's
    # models are not OpenAI's, so their inputs go as text.
    embeddings = OpenAIEmbeddings(
        model=EMBEDDING,
        base_url=live_server.base_url,
        api_key=api_key,
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    vectors = embeddings.embed_documents(["first text", "second text", "first text"])
    assert [len(v) for v in vectors] == [1024] * 3
    assert vectors[0] == vectors[2] != vectors[1]
    assert embeddings.embed_query("first text") == pytest.approx(vectors[0])
    assert sum(x * x for x in vectors[1]) == pytest.approx(1.0, abs=1e-5)
    json.dumps(vectors)  # plain floats


@pytest.mark.parametrize("streaming", [False, True])
def test_logprobs_true_gives_each_tokens_logprob(live_server: Any, api_key: str, streaming: bool) -> None:
    """``ChatOpenAI(logprobs=True)``: the message's ``response_metadata["logprobs"]["content"]`` lists every token
    (streamed: gathered from the chunks)."""
    with httpx2.Client() as http:
        chat = ChatOpenAI(
            model=ALIAS,
            base_url=live_server.base_url,
            api_key=api_key,
            max_retries=0,
            http_client=http,
            logprobs=True,
            top_logprobs=2,
            max_completion_tokens=6,
            streaming=streaming,
        )
        message = chat.invoke("Tell me about the fleet.")
    tokens = message.response_metadata["logprobs"]["content"]
    assert len(tokens) == 6
    assert "".join(t["token"] for t in tokens) == message.content
    assert all(len(t["top_logprobs"]) == 2 and t["logprob"] <= 0 for t in tokens)
