"""Cached prompt tokens on the wire and on the books: a long prompt sent again reads its prefix from the replica that
served it, chat completions report ``usage.prompt_tokens_details.cached_tokens`` (streamed and not), the compute
is lower, usage events and ``/v1/usage`` count them, and ``prompt_cache_key`` is the fleet's session hint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import openai
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.inference.schemas import ChatCompletionCreate
from switchyard.platform.models import UsageEvent, utc_now

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
INSTRUCTIONS = "You are the travel desk's agent. Answer with the itinerary, the fares and the rules. " * 60


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


def _messages(system: str, question: str) -> list[Any]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def _chip_us(usage: Any) -> int:
    return int((usage.model_extra or {})["compute"]["chip_us"])


async def test_a_repeated_long_prompt_is_cached_the_second_time_and_costs_less(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    messages = _messages(INSTRUCTIONS, "Paris to Lyon on Friday?")

    first = await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, seed=1)
    second = await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, seed=1)
    other = await sdk.chat.completions.create(
        model=MODEL, messages=_messages("A different agent. " * 300, "Paris to Lyon on Friday?"), max_tokens=8, seed=1
    )

    assert first.usage is not None
    assert second.usage is not None
    assert other.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details is not None
    assert other.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens > 1000
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None
    assert first.usage.prompt_tokens * 0.9 < cached < second.usage.prompt_tokens
    assert _chip_us(second.usage) < _chip_us(first.usage)  # the cached tokens cost what reading them took
    saved = int((second.usage.model_extra or {})["compute"]["cache_saved_chip_us"])
    assert 0 < saved <= _chip_us(first.usage) - _chip_us(second.usage)  # an estimate that never overstates
    assert (first.usage.model_extra or {})["compute"]["cache_saved_chip_us"] == 0
    assert other.usage.prompt_tokens_details.cached_tokens == 0  # another prompt shares none of its blocks

    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        events = {e.event_id: e for e in (await session.execute(select(UsageEvent))).scalars()}
    assert sorted(e.cached_tokens for e in events.values()) == [0, 0, cached]
    assert sorted(e.chip_us for e in events.values() if e.cached_tokens) == [_chip_us(second.usage)]
    assert sorted(e.cache_saved_chip_us for e in events.values()) == [0, 0, saved]

    now = utc_now()
    window = {"start_time": int((now - timedelta(days=1)).timestamp()), "end_time": int(now.timestamp()) + 3600}
    read = await client.get("/v1/usage", params=window, headers=tenant.headers("viewer"))
    assert read.status_code == 200, read.text
    results = [r for bucket in read.json()["data"] for r in bucket["results"]]
    assert sum(r["input_cached_tokens"] for r in results) == cached
    assert sum(r["cache_saved_chip_us"] for r in results) == saved
    assert sum(r["input_tokens"] for r in results) == sum(e.prompt_tokens for e in events.values())


async def test_a_streamed_answer_reports_cached_tokens_in_its_usage_chunk(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    messages = _messages(INSTRUCTIONS, "And back on Sunday?")
    cached = []
    for _ in range(2):
        stream = await sdk.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=6, stream=True, stream_options={"include_usage": True}
        )
        usages = [chunk.usage async for chunk in stream if chunk.usage is not None]
        assert len(usages) == 1
        assert usages[0].prompt_tokens_details is not None
        cached.append(usages[0].prompt_tokens_details.cached_tokens)
    assert cached[0] == 0
    assert cached[1] is not None
    assert cached[1] > 1000


async def test_one_tenants_cached_prompt_is_not_another_tenants_cache_hit(client: Any, make_tenant: Any) -> None:
    """The block hashes start from the tenant: cached tokens never tell a tenant what another one sent."""
    one, other = await make_tenant(), await make_tenant()
    messages = _messages(INSTRUCTIONS, "Rome?")
    await _sdk(client, one.keys["developer"]).chat.completions.create(model=MODEL, messages=messages, max_tokens=4)
    theirs = await _sdk(client, other.keys["developer"]).chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4
    )
    assert theirs.usage is not None
    assert theirs.usage.prompt_tokens_details is not None
    assert theirs.usage.prompt_tokens_details.cached_tokens == 0


def test_prompt_cache_key_is_the_fleet_session_else_the_user() -> None:
    def session(**fields: Any) -> str | None:
        body = ChatCompletionCreate.model_validate({"model": MODEL, "messages": _messages("s", "q"), **fields})
        return body.fleet_session

    assert session(prompt_cache_key="trip-planner", user="u1") == "trip-planner"
    assert session(user="u1") == "u1"
    assert session() is None
