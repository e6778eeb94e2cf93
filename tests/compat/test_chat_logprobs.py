"""Token logprobs and refusals of chat completions, through the official `openai` client against a real Switchyard
server: the sim model served by a fleet process (synthetic logprobs), and an `openai-compatible` upstream on
127.0.0.1 whose logprobs and refusals reach the client exactly as it sent them. Every answer is validated against
the `openai` package's own types (the client builds its models without checking them)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionTokenLogprob

from switchyard.accelerator.pool.echo_upstream import REFUSAL, REFUSAL_TRIGGER
from tests.compat.test_chat_fidelity import RECORDED, SIM, base_url, client

__all__ = ["base_url", "client"]  # the fidelity test's server: the sim on a fleet process and a recording upstream

HELLO = [{"role": "user", "content": "Tell me about the fleet."}]
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def _raw(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    """The answer's JSON as the server sent it, validated as OpenAI's ``ChatCompletion``."""
    response = client.chat.completions.with_raw_response.create(**body)
    answer: dict[str, Any] = response.http_response.json()
    ChatCompletion.model_validate(answer)
    return answer


def _chunks(client: openai.OpenAI, **body: Any) -> list[dict[str, Any]]:
    """The stream's chunks as the server sent them, each validated as OpenAI's ``ChatCompletionChunk``."""
    with client.chat.completions.with_streaming_response.create(stream=True, **body) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    return chunks


def _assert_sensible(entry: dict[str, Any], top: int) -> None:
    token = ChatCompletionTokenLogprob.model_validate(entry)
    assert token.bytes == list(token.token.encode())
    assert token.logprob <= 0
    assert len(token.top_logprobs) == top
    assert len({t.token for t in token.top_logprobs}) == top
    assert all(t.logprob <= token.logprob for t in token.top_logprobs)


@pytest.mark.parametrize("top", [0, 1, 5, 20])
def test_the_sim_answers_logprobs_for_every_token(client: openai.OpenAI, top: int) -> None:
    answer = _raw(client, model=SIM, messages=HELLO, max_tokens=12, seed=3, logprobs=True, top_logprobs=top)
    choice = answer["choices"][0]
    content = choice["logprobs"]["content"]
    assert choice["logprobs"]["refusal"] is None
    assert len(content) == answer["usage"]["completion_tokens"] == 12
    assert "".join(entry["token"] for entry in content) == choice["message"]["content"]
    for entry in content:
        _assert_sensible(entry, top)
    # the client's own reading of it
    parsed = client.chat.completions.create(model=SIM, messages=HELLO, max_tokens=12, seed=3, logprobs=True)
    assert parsed.choices[0].logprobs is not None
    assert parsed.choices[0].logprobs.content is not None
    assert [t.token for t in parsed.choices[0].logprobs.content] == [entry["token"] for entry in content]
    assert [t.logprob for t in parsed.choices[0].logprobs.content] == [entry["logprob"] for entry in content]


def test_without_logprobs_there_are_none(client: openai.OpenAI) -> None:
    assert _raw(client, model=SIM, messages=HELLO, max_tokens=5)["choices"][0]["logprobs"] is None
    assert _raw(client, model=SIM, messages=HELLO, max_tokens=5, logprobs=False)["choices"][0]["logprobs"] is None
    chunks = _chunks(client, model=SIM, messages=HELLO, max_tokens=5)
    assert all(c["choices"][0]["logprobs"] is None for c in chunks if c["choices"])


def test_each_streamed_chunk_carries_the_logprobs_of_its_tokens(client: openai.OpenAI) -> None:
    body = {"model": SIM, "messages": HELLO, "max_tokens": 10, "seed": 5, "logprobs": True, "top_logprobs": 2}
    whole = _raw(client, **body)["choices"][0]["logprobs"]["content"]
    chunks = _chunks(client, **body, stream_options={"include_usage": True})
    with_text = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(with_text) == 10
    for choice in with_text:
        tokens = choice["logprobs"]["content"]
        assert "".join(t["token"] for t in tokens) == choice["delta"]["content"]
        assert choice["logprobs"]["refusal"] is None
    assert [t for c in with_text for t in c["logprobs"]["content"]] == whole  # the stream's are the answer's
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 10


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_answer_has_no_content_logprobs(client: openai.OpenAI, stream: bool) -> None:
    body = {"model": SIM, "messages": HELLO, "tools": [WEATHER], "tool_choice": "required", "logprobs": True}
    if not stream:
        choice = _raw(client, **body)["choices"][0]
        assert choice["message"]["tool_calls"]
        assert choice["logprobs"] == {"content": None, "refusal": None}
        return
    chunks = _chunks(client, **body)
    assert any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c["choices"])
    assert [t for c in chunks if c["choices"] for t in (c["choices"][0]["logprobs"] or {}).get("content") or ()] == []


@pytest.mark.parametrize("top_logprobs", [0, 3])
def test_top_logprobs_without_logprobs_is_refused_by_name(client: openai.OpenAI, top_logprobs: int) -> None:
    for logprobs in (None, False):
        extra = {} if logprobs is None else {"logprobs": logprobs}
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=SIM, messages=HELLO, top_logprobs=top_logprobs, **extra)
        error = refused.value.body
        assert isinstance(error, dict)
        assert error["param"] == "top_logprobs"
        assert error["code"] == "invalid_value"
        assert error["type"] == "invalid_request_error"
        assert "logprobs" in error["message"]


@pytest.mark.parametrize("top_logprobs", [-1, 21])
def test_top_logprobs_out_of_range_is_refused_by_name(client: openai.OpenAI, top_logprobs: int) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=SIM, messages=HELLO, logprobs=True, top_logprobs=top_logprobs)
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["param"] == "top_logprobs"


def _direct(fake_upstream: Any, **body: Any) -> Any:
    """What the upstream answers when asked directly (its chunks' choices, when streamed)."""
    response = httpx.post(f"{fake_upstream.base_url}/chat/completions", json={"model": "real", **body})
    response.raise_for_status()
    if not body.get("stream"):
        return response.json()["choices"][0]
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [choice for line in lines[:-1] for choice in json.loads(line)["choices"]]


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstreams_logprobs_reach_the_client_exactly(
    client: openai.OpenAI, fake_upstream: Any, stream: bool
) -> None:
    body = {"messages": HELLO, "logprobs": True, "top_logprobs": 4}
    direct = _direct(fake_upstream, **body, stream=stream)
    if not stream:
        choice = _raw(client, model=RECORDED, **body)["choices"][0]
        assert choice["logprobs"] == direct["logprobs"]
        assert choice["message"]["content"] == direct["message"]["content"]
        return
    ours = [c["choices"][0] for c in _chunks(client, model=RECORDED, **body) if c["choices"]]
    theirs = [c for c in direct if c["delta"].get("content")]
    ours_text = [c for c in ours if c["delta"].get("content")]
    assert [(c["delta"], c["logprobs"]) for c in ours_text] == [(c["delta"], c["logprobs"]) for c in theirs]


@pytest.mark.parametrize("logprobs", [False, True])
def test_an_upstreams_refusal_reaches_the_client(client: openai.OpenAI, fake_upstream: Any, logprobs: bool) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": f"{REFUSAL_TRIGGER} this"}]}
    if logprobs:
        body |= {"logprobs": True, "top_logprobs": 1}
    choice = _raw(client, model=RECORDED, **body)["choices"][0]
    assert choice["message"]["content"] is None
    assert choice["message"]["refusal"] == REFUSAL
    direct = _direct(fake_upstream, **body)
    assert choice["logprobs"] == (direct["logprobs"] if logprobs else None)
    parsed = client.chat.completions.create(model=RECORDED, **body)
    assert parsed.choices[0].message.refusal == REFUSAL

    chunks = [c["choices"][0] for c in _chunks(client, model=RECORDED, **body) if c["choices"]]
    refused = [c for c in chunks if c["delta"].get("refusal")]
    assert "".join(c["delta"]["refusal"] for c in refused) == REFUSAL
    assert not any(c["delta"].get("content") for c in chunks)
    if logprobs:
        streamed = [t for c in refused for t in c["logprobs"]["refusal"]]
        assert streamed == direct["logprobs"]["refusal"]
        assert all(c["logprobs"]["content"] is None for c in refused)
