"""Cached input tokens in the Responses API: a response whose long instructions were served moments ago reports
``usage.input_tokens_details.cached_tokens`` and costs less; its usage event counts them; the fleet session of a
response is its ``prompt_cache_key``, else its conversation, else its agent version."""

from __future__ import annotations

from typing import Any

import openai
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ResponseRecord, UsageEvent
from switchyard.platform.responses.executor import fleet_session

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
INSTRUCTIONS = "You answer for the museum's front desk: opening hours, tickets, the cloakroom and the cafe. " * 60


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


def _chip_us(usage: Any) -> int:
    return int((usage.model_extra or {})["compute"]["chip_us"])


async def test_a_repeated_long_prompt_reports_cached_input_tokens_and_costs_less(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    ask: dict[str, Any] = {"model": MODEL, "input": "When do you open?", "max_output_tokens": 16}

    first = await sdk.responses.create(instructions=INSTRUCTIONS, **ask)
    second = await sdk.responses.create(instructions=INSTRUCTIONS, **ask)
    other = await sdk.responses.create(instructions="Another desk entirely. " * 300, **ask)

    assert first.usage is not None
    assert second.usage is not None
    assert other.usage is not None
    assert first.usage.input_tokens > 1000
    assert first.usage.input_tokens_details.cached_tokens == 0
    cached = second.usage.input_tokens_details.cached_tokens
    assert first.usage.input_tokens * 0.9 < cached < second.usage.input_tokens
    assert _chip_us(second.usage) < _chip_us(first.usage)
    assert other.usage.input_tokens_details.cached_tokens == 0
    retrieved = await sdk.responses.retrieve(second.id)
    assert retrieved.usage is not None
    assert retrieved.usage.input_tokens_details.cached_tokens == cached

    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        events = list((await session.execute(select(UsageEvent))).scalars())
    assert sorted(e.cached_tokens for e in events) == [0, 0, cached]


def test_a_responses_fleet_session_is_its_cache_key_else_its_conversation_else_its_agent_version() -> None:
    def row(**fields: Any) -> ResponseRecord:
        return ResponseRecord(id="resp_1", tenant_id="ten_1", model=MODEL, **fields)

    assert fleet_session(row(request={"prompt_cache_key": "k"}, conversation_id="conv_1")) == "k"
    assert fleet_session(row(conversation_id="conv_1", agent_id="agt_1", agent_version=2)) == "conv_1"
    assert fleet_session(row(agent_id="agt_1", agent_version=2)) == "agt_1@2"
    assert fleet_session(row()) == "resp_1"
