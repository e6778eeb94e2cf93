"""Token logprobs of `/v1/responses` (`include: ["message.output_text.logprobs"]`, `top_logprobs`): each
`output_text` and its `response.output_text.delta`/`done` events carry them, streamed live, stored, in a background
response's stored stream, and from an `openai-compatible` upstream as it sent them; every object validated against
the `openai` package's types."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent

from tests.compat.test_chat_fidelity import RECORDED, base_url, client
from tests.compat.test_responses_wire_shapes import validate

__all__ = ["base_url", "client"]  # the fidelity test's server, whose `recorded` model is a recording upstream

ALIAS = "llama-3.1-8b-instruct"
INCLUDE = ["message.output_text.logprobs"]


@pytest.fixture
def http(live_server: Any, api_key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=live_server.base_url, headers=headers, timeout=30) as client:  # a loaded CI machine
        yield client


def _create(http: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = http.post("/responses", json={"model": ALIAS, **body})
    assert answer.status_code == 200, answer.text
    response = dict(answer.json())
    Response.model_validate(response)
    return response


def _events(http: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    with http.stream("POST", "/responses", json={"model": ALIAS, "stream": True, **body}) as stream:
        events = [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]
    for event in events:
        validate(ResponseStreamEvent, event)
    return events


def _output_text(response: dict[str, Any]) -> dict[str, Any]:
    (message,) = [item for item in response["output"] if item["type"] == "message"]
    part: dict[str, Any] = message["content"][0]
    return part


def _without_bytes(logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An ``output_text``'s logprobs as the text events spell them."""
    return [
        {
            "token": t["token"],
            "logprob": t["logprob"],
            "top_logprobs": [{"token": a["token"], "logprob": a["logprob"]} for a in t["top_logprobs"]],
        }
        for t in logprobs
    ]


@pytest.mark.parametrize("top", [0, 3])
def test_output_text_carries_every_tokens_logprob(http: httpx.Client, top: int) -> None:
    response = _create(http, input="Tell me about the fleet.", max_output_tokens=9, include=INCLUDE, top_logprobs=top)
    part = _output_text(response)
    logprobs = part["logprobs"]
    assert len(logprobs) == response["usage"]["output_tokens"] == 9
    assert "".join(t["token"] for t in logprobs) == part["text"]
    for token in logprobs:
        assert token["bytes"] == list(token["token"].encode())
        assert token["logprob"] <= 0
        assert len(token["top_logprobs"]) == top
        assert all(alternative["logprob"] <= token["logprob"] for alternative in token["top_logprobs"])
    assert response["top_logprobs"] == top
    stored = http.get(f"/responses/{response['id']}").json()
    assert _output_text(stored)["logprobs"] == logprobs


def test_without_include_there_are_none(http: httpx.Client) -> None:
    response = _create(http, input="Tell me about the fleet.", max_output_tokens=5, top_logprobs=2)
    assert _output_text(response)["logprobs"] == []
    for event in _events(http, input="Hi", max_output_tokens=5):
        assert event.get("logprobs", []) == []


def test_streamed_deltas_carry_their_tokens_logprobs(http: httpx.Client) -> None:
    events = _events(http, input="Tell me about the fleet.", max_output_tokens=7, include=INCLUDE, top_logprobs=2)
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 7
    for delta in deltas:
        assert "".join(t["token"] for t in delta["logprobs"]) == delta["delta"]
    (done,) = [e for e in events if e["type"] == "response.output_text.done"]
    (finished,) = [e for e in events if e["type"] == "response.incomplete"]  # cut at max_output_tokens
    final = _output_text(finished["response"])["logprobs"]
    assert len(final) == 7
    assert [t for d in deltas for t in d["logprobs"]] == done["logprobs"] == _without_bytes(final)
    (part_done,) = [e for e in events if e["type"] == "response.content_part.done"]
    assert part_done["part"]["logprobs"] == final


def test_a_background_responses_stored_stream_carries_the_logprobs(http: httpx.Client) -> None:
    created = _create(http, input="Tell me.", max_output_tokens=6, include=INCLUDE, top_logprobs=1, background=True)
    deadline = time.monotonic() + 30
    while (response := http.get(f"/responses/{created['id']}").json())["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the background response did not finish"
        time.sleep(0.05)
    Response.model_validate(response)
    final = _output_text(response)["logprobs"]
    assert len(final) == 6
    with http.stream("GET", f"/responses/{created['id']}", params={"stream": "true"}) as stream:
        events = [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    for event in deltas:
        validate(ResponseStreamEvent, event)
    assert [t for d in deltas for t in d["logprobs"]] == _without_bytes(final)


def test_an_upstreams_logprobs_reach_the_output_text(client: openai.OpenAI, fake_upstream: Any) -> None:
    before = len(fake_upstream.requests)
    response = client.responses.create(
        model=RECORDED, input="Where?", include=["message.output_text.logprobs"], top_logprobs=2
    )
    received = fake_upstream.requests[before]
    assert (received["logprobs"], received["top_logprobs"]) == (True, 2)
    whole = {key: value for key, value in received.items() if key not in ("stream", "stream_options")}
    direct = httpx.post(f"{fake_upstream.base_url}/chat/completions", json=whole).json()
    theirs = direct["choices"][0]["logprobs"]["content"]
    (part,) = next(item for item in response.output if item.type == "message").content
    assert part.type == "output_text"
    assert part.text == direct["choices"][0]["message"]["content"]
    assert [t.model_dump() for t in part.logprobs or ()] == theirs


def test_a_response_with_logprobs_chains_and_its_successor_asks_afresh(http: httpx.Client) -> None:
    first = _create(http, input="Tell me.", max_output_tokens=4, include=INCLUDE, top_logprobs=1)
    second = _create(http, input="And more?", max_output_tokens=4, previous_response_id=first["id"])
    assert _output_text(second)["logprobs"] == []  # include is per response, as at OpenAI
    third = _create(http, input="Again.", max_output_tokens=4, previous_response_id=second["id"], include=INCLUDE)
    assert len(_output_text(third)["logprobs"]) == 4


@pytest.mark.parametrize("top", [-1, 21])
def test_top_logprobs_out_of_range_is_refused_by_name(http: httpx.Client, top: int) -> None:
    refused = http.post("/responses", json={"model": ALIAS, "input": "Hi", "include": INCLUDE, "top_logprobs": top})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["param"], error["type"]) == ("top_logprobs", "invalid_request_error")
