"""A hard budget is a ceiling (issue 22, finding 2): admission holds enough for the largest answer a call may
produce, and no answer produces more than that, tool-call arguments included. The two attacks of the finding,
exactly: `/v1/responses` with `max_output_tokens: 16`, `tool_choice: "required"` and a tool of ten arrays of at
least 2,000 items each, and a chat completion with `max_tokens: 1` and the same tool, each under a hard budget."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool
from switchyard.platform.admission import ModelCall, exceeds_hold
from switchyard.platform.db import UNSCOPED, TenantScope
from switchyard.platform.models import UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BULKY_ARGUMENTS = {
    "type": "object",
    "properties": {f"p{n}": {"type": "array", "minItems": 2000, "items": {"type": "string"}} for n in range(10)},
    "required": [f"p{n}" for n in range(10)],
}


async def _hard_budget(client: Any, tenant: Any, cents: int) -> str:
    budget = await client.post("/v1/budgets", json={"limit_minor": cents, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text
    return str(budget.json()["id"])


async def _spent(client: Any, tenant: Any, budget_id: str) -> Decimal:
    await client.app.state.gateway.drain()
    budget = await client.get(f"/v1/budgets/{budget_id}", headers=tenant.headers())
    assert budget.status_code == 200, budget.text
    return Decimal(budget.json()["spent"])


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_a_responses_tool_call_stops_at_max_output_tokens_within_a_hard_budget(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    budget_id = await _hard_budget(client, tenant, 10)  # $0.10, as in the finding
    body = {
        "model": MODEL,
        "input": "Fill the form.",
        "max_output_tokens": 16,
        "tool_choice": "required",
        "tools": [{"type": "function", "name": "fill", "parameters": BULKY_ARGUMENTS}],
    }
    answered = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))

    assert answered.status_code == 200, answered.text
    response = answered.json()
    assert response["usage"]["output_tokens"] <= 16
    assert (response["status"], response["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert [event.completion_tokens <= 16 for event in await _usage(client)] == [True]
    assert await _spent(client, tenant, budget_id) <= Decimal("0.10")


async def test_a_chat_tool_call_stops_at_max_tokens_within_a_hard_budget(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    budget_id = await _hard_budget(client, tenant, 5)  # $0.05, as in the finding
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Fill the form."}],
        "max_tokens": 1,
        "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "fill", "parameters": BULKY_ARGUMENTS}}],
    }
    answered = await client.post("/v1/chat/completions", json=body, headers=tenant.headers("developer"))

    assert answered.status_code == 200, answered.text
    completion = answered.json()
    assert completion["usage"]["completion_tokens"] <= 1
    assert completion["choices"][0]["finish_reason"] == "length"
    assert [event.completion_tokens for event in await _usage(client)] == [completion["usage"]["completion_tokens"]]
    assert await _spent(client, tenant, budget_id) <= Decimal("0.05")


def test_a_call_that_used_more_than_its_hold_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    backend = AcceleratorPool.from_specs(DEFAULT_FLEET, time_scale=0).backend(MODEL)
    call = ModelCall(
        scope=TenantScope("t1"),
        api_key_id=None,
        agent_id=None,
        backend=backend,
        prompt_tokens=20,
        output_tokens=16,
        holder="chatcmpl-1",
    )
    bound = backend.max_chip_us(20, 16)
    with caplog.at_level(logging.ERROR):
        assert not exceeds_hold(call, chip_us=bound, completion_tokens=16)
        assert caplog.records == []
        assert exceeds_hold(call, chip_us=bound, completion_tokens=17)
        assert exceeds_hold(call, chip_us=bound + 1, completion_tokens=1)
    assert len(caplog.records) == 2
    assert "chatcmpl-1" in caplog.records[0].getMessage()
    assert "17 output tokens of 16 allowed" in caplog.records[0].getMessage()
