"""Asking for logprobs changes nothing of what a chat completion is metered and billed: the same chip-µs and tokens
in the answer's usage and in its usage event, streamed or not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.inference.runtime import build_pool, reload_pool
from switchyard.platform.models import UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
QUESTION = [{"role": "user", "content": "How are requests batched?"}]


async def _completion(client: Any, headers: dict[str, str], body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The answer (its usage and logprobs, streamed or whole) and its usage event."""
    response = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    if body.get("stream"):
        chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
        usage = chunks[-1]["usage"]
        logprobs = [t for c in chunks if c["choices"] for t in (c["choices"][0]["logprobs"] or {}).get("content") or ()]
        completion_id = chunks[0]["id"]
    else:
        answer = response.json()
        usage = answer["usage"]
        logprobs = (answer["choices"][0]["logprobs"] or {}).get("content") or []
        completion_id = answer["id"]
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        event = (await session.execute(select(UsageEvent).where(UsageEvent.event_id == completion_id))).scalar_one()
    return {"usage": usage, "logprobs": logprobs}, event


@pytest.mark.parametrize("stream", [False, True])
async def test_logprobs_meter_the_same_chip_us_and_tokens(
    settings: Any, client: Any, make_tenant: Any, stream: bool
) -> None:
    tenant = await make_tenant()
    body: dict[str, Any] = {"model": MODEL, "messages": QUESTION, "max_tokens": 24, "seed": 2, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    answers = []
    for extra in ({}, {"logprobs": True, "top_logprobs": 20}):
        # a fresh fleet for each: the simulated clock then starts at 0 for both, so their compute is comparable exactly
        await reload_pool(client.app.state, build_pool(settings))
        answers.append(await _completion(client, tenant.headers("developer"), body | extra))
    (plain, plain_event), (with_logprobs, event) = answers
    assert plain["logprobs"] == []
    assert len(with_logprobs["logprobs"]) == 24
    assert with_logprobs["usage"] == plain["usage"]
    assert plain["usage"]["compute"]["chip_us"] > 0
    metered = (event.chip_us, event.prompt_tokens, event.completion_tokens, event.instance_type)
    assert metered == (plain_event.chip_us, plain_event.prompt_tokens, plain_event.completion_tokens, "trn2.48xlarge")
    assert event.chip_us == plain["usage"]["compute"]["chip_us"]
    assert event.completion_tokens == 24
