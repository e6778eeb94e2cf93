"""A model asked for by its alias is billed under its served name by every front end: `/v1/responses` records the
same model name as `/v1/chat/completions`, so usage, budgets, invoices and charts see one model, not two."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import BudgetReservation, UsageEvent

SERVED = "meta-llama/Llama-3.1-8B-Instruct"
ALIAS = "llama-3.1-8b-instruct"


async def test_an_alias_through_responses_and_chat_completions_is_one_model_in_usage(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    budget = await client.post("/v1/budgets", json={"limit_minor": 10_000, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text

    chat = await client.post(
        "/v1/chat/completions",
        json={"model": ALIAS, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4},
        headers=headers,
    )
    answered = await client.post(
        "/v1/responses", json={"model": ALIAS, "input": "Say hello.", "max_output_tokens": 4}, headers=headers
    )

    assert chat.status_code == 200, chat.text
    assert answered.status_code == 200, answered.text
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        usage = list((await session.execute(select(UsageEvent))).scalars())
        holds = list((await session.execute(select(BudgetReservation))).scalars())
    assert len(usage) == 2
    assert {event.model for event in usage} == {SERVED}
    assert [hold.status for hold in holds] == ["settled", "settled"]
    assert {hold.model for hold in holds} == {SERVED}
