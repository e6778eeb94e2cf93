"""/v1/completions through the app: OpenAI's ``text_completion`` shapes, each choice metered like a chat completion,
and the parameters it does not serve refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types import Completion
from sqlalchemy import select

from switchyard.accelerator.pool import count_tokens
from switchyard.platform.db import UNSCOPED
from switchyard.platform.inference.text_completion_schemas import MAX_TOKEN_ID, token_ids_text
from switchyard.platform.models import UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _completion(prompt: Any = "Say this is a test", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": prompt, **extra}


async def _usage_events(client: Any) -> dict[str, UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return {e.event_id: e for e in (await session.execute(select(UsageEvent))).scalars()}


def _events(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]


def _chunk(data: str) -> tuple[Completion, list[str | None]]:
    """A streamed chunk checked against the SDK's ``Completion``, and its choices' finish reasons: ``null`` until a
    choice ends, as OpenAI streams them (the SDK reads chunks without validating them, so its type has no null)."""
    chunk = json.loads(data)
    reasons = [choice["finish_reason"] for choice in chunk["choices"]]
    for choice in chunk["choices"]:
        choice["finish_reason"] = choice["finish_reason"] or "stop"
    return Completion.model_validate(chunk), reasons


async def test_a_text_prompt_answers_a_text_completion_billed_as_one_usage_event(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    answer = await client.post("/v1/completions", json=_completion(seed=3), headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    completion = Completion.model_validate(answer.json())
    assert completion.object == "text_completion"
    assert completion.id.startswith("cmpl-")
    (choice,) = completion.choices
    assert choice.index == 0
    assert choice.text
    assert choice.logprobs is None
    assert completion.usage is not None
    assert 1 <= completion.usage.completion_tokens <= 16  # OpenAI's default max_tokens for this API
    assert count_tokens(choice.text) == completion.usage.completion_tokens
    (event,) = (await _usage_events(client)).values()
    assert event.event_id == completion.id
    assert event.chip_us == answer.json()["usage"]["compute"]["chip_us"] == int(answer.headers["x-switchyard-chip-us"])
    assert (event.prompt_tokens, event.completion_tokens) == (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    )


async def test_each_prompt_of_a_list_gets_n_choices_each_billed_once(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = _completion(["one prompt", "another prompt"], n=2, max_tokens=5)
    answer = await client.post("/v1/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    completion = Completion.model_validate(answer.json())
    assert [c.index for c in completion.choices] == [0, 1, 2, 3]
    assert completion.choices[0].text != completion.choices[1].text  # n choices of one prompt differ
    events = await _usage_events(client)
    assert set(events) == {f"{completion.id}-{index}" for index in range(4)}
    usage = answer.json()["usage"]
    assert usage["compute"]["chip_us"] == sum(e.chip_us for e in events.values())
    assert usage["completion_tokens"] == sum(e.completion_tokens for e in events.values())
    assert usage["prompt_tokens"] == sum(e.prompt_tokens for e in events.values())


def test_token_ids_are_written_as_one_token_each() -> None:
    ids = [0, 35, 36, 50256, 128_000, MAX_TOKEN_ID]
    assert count_tokens(token_ids_text(ids)) == len(ids)


@pytest.mark.parametrize("prompt", [[7, 8, 9, 10, 11], [[7, 8, 9, 10, 11]]])
async def test_a_token_id_prompt_counts_one_prompt_token_per_id(
    client: Any, make_tenant: Any, prompt: list[Any]
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    five = await client.post("/v1/completions", json=_completion(prompt, max_tokens=1), headers=headers)
    one = await client.post("/v1/completions", json=_completion([3], max_tokens=1), headers=headers)
    assert five.status_code == one.status_code == 200, five.text
    assert five.json()["usage"]["prompt_tokens"] - one.json()["usage"]["prompt_tokens"] == 4


async def test_a_streamed_completion_is_text_completion_chunks_ending_with_usage(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    whole = await client.post("/v1/completions", json=_completion(seed=5, max_tokens=6), headers=headers)
    body = _completion(seed=5, max_tokens=6, stream=True, stream_options={"include_usage": True})
    streamed = await client.post("/v1/completions", json=body, headers=headers)
    assert streamed.status_code == 200, streamed.text
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = _events(streamed.text)
    assert events[-1] == "[DONE]"
    chunks = [_chunk(data) for data in events[:-1]]
    assert {c.object for c, _ in chunks} == {"text_completion"}
    *texts, (usage, _) = chunks
    assert "".join(c.choices[0].text for c, _ in texts) == whole.json()["choices"][0]["text"]
    reasons = [reason for _, (reason,) in texts]
    assert reasons == [None] * (len(texts) - 1) + [whole.json()["choices"][0]["finish_reason"]]
    assert usage.choices == []
    assert usage.usage is not None
    assert usage.usage.completion_tokens == whole.json()["usage"]["completion_tokens"]
    assert len(await _usage_events(client)) == 2


async def test_integer_logprobs_answer_openais_legacy_logprobs(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = _completion(logprobs=2, max_tokens=6)
    answer = await client.post("/v1/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    (choice,) = Completion.model_validate(answer.json()).choices
    logprobs = choice.logprobs
    assert logprobs is not None
    assert logprobs.tokens
    assert logprobs.token_logprobs
    assert logprobs.top_logprobs
    assert "".join(logprobs.tokens) == choice.text
    assert logprobs.text_offset == [len("".join(logprobs.tokens[:i])) for i in range(len(logprobs.tokens))]
    assert all(lp <= 0 for lp in logprobs.token_logprobs)
    assert all(len(top) <= 2 for top in logprobs.top_logprobs)


@pytest.mark.parametrize(
    ("extra", "param"),
    [({"echo": True}, "echo"), ({"suffix": "end."}, "suffix"), ({"best_of": 3}, "best_of"), ({"n": 129}, "n")],
)
async def test_what_is_not_served_is_refused_by_name_and_billed_nothing(
    client: Any, make_tenant: Any, extra: dict[str, Any], param: str
) -> None:
    tenant = await make_tenant()
    refused = await client.post("/v1/completions", json=_completion(**extra), headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert await _usage_events(client) == {}


async def test_the_defaults_clients_send_for_unserved_parameters_are_accepted(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = _completion(echo=False, suffix=None, best_of=1, n=1, logprobs=None, user="u-1", temperature=0.7)
    answer = await client.post("/v1/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text


async def test_a_prompt_past_the_token_limit_is_refused_naming_the_prompt(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    settings.tenant_tokens_per_minute = 100
    tenant = await make_tenant()
    body = _completion("word " * 150, max_tokens=1)
    refused = await client.post("/v1/completions", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("request_exceeds_token_limit", "prompt")
    assert "in the prompt" in error["message"]


async def test_a_refused_later_choice_gives_back_what_the_earlier_ones_hold(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    settings.tenant_max_concurrency = 1
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    refused = await client.post("/v1/completions", json=_completion(n=2, max_tokens=2), headers=headers)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "concurrency_limit_exceeded"
    again = await client.post("/v1/completions", json=_completion(max_tokens=2), headers=headers)
    assert again.status_code == 200, again.text  # the first choice's slot was given back
    assert set(await _usage_events(client)) == {again.json()["id"]}
