"""The OpenAPI document describes ``POST /v1/completions`` and ``POST /v1/responses/input_tokens``, and real answers
conform to it."""

from __future__ import annotations

import json
from typing import Any

from tests.platform.api.test_openapi import _DOCUMENT, _assert_conforms

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _answer(method: str, path: str) -> dict[str, Any]:
    return dict(_DOCUMENT["paths"][path][method]["responses"]["200"]["content"])


def test_a_text_completion_is_documented_with_its_chunks_and_refusals() -> None:
    content = _answer("post", "/v1/completions")
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/TextCompletion"}
    data = content["text/event-stream"]["schema"]["properties"]["data"]["anyOf"]
    assert {"const": "[DONE]"} in data
    assert {"$ref": "#/components/schemas/TextCompletionChunk"} in data[0]["contentSchema"]["anyOf"]
    assert {400, 402, 404, 429} <= {int(code) for code in _DOCUMENT["paths"]["/v1/completions"]["post"]["responses"]}


def test_input_token_counting_is_documented() -> None:
    operation = _DOCUMENT["paths"]["/v1/responses/input_tokens"]["post"]
    assert {200, 400, 404} <= {int(code) for code in operation["responses"]}
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/InputTokensCount"}


async def test_real_text_completions_and_their_streams_conform(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "prompt": ["Hi", "Bye"], "n": 2, "max_tokens": 4, "logprobs": 1}
    answer = await client.post("/v1/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    _assert_conforms(answer.json(), _answer("post", "/v1/completions")["application/json"]["schema"])
    streamed_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    streamed = await client.post("/v1/completions", json=streamed_body, headers=tenant.headers("developer"))
    event_schema = _answer("post", "/v1/completions")["text/event-stream"]["schema"]
    chunk_schema = event_schema["properties"]["data"]["anyOf"][0]["contentSchema"]
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert len(events) > 6
    for data in events[:-1]:
        _assert_conforms(json.loads(data), chunk_schema)
