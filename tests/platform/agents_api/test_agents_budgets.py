"""Agent runs honour budgets: each model call holds its estimated maximum, settled to its actual compute."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import select

from switchyard.platform.db import TenantScope
from switchyard.platform.models import BudgetReservation, Run, Thread, UsageEvent
from tests.platform.agents_api.factories import make_agent, wait_for_run

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


async def test_budgets_hold_and_settle_each_model_call(client: Any, make_tenant: Any, inline_runs: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    budget = await client.post("/v1/budgets", json={"limit_minor": 10**9}, headers=tenant.headers("admin"))
    assert budget.status_code in (200, 201), budget.text
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    run = (
        await client.post(
            "/v1/runs",
            json={"agent_id": agent["id"], "thread": {"messages": [{"content": "use the calculator expression=1+1"}]}},
            headers=headers,
        )
    ).json()
    run = await wait_for_run(client, run["thread_id"], run["id"], headers, statuses=FINAL)
    assert run["status"] == "completed"
    [row] = (await client.get("/v1/budgets", headers=tenant.headers("admin"))).json()["data"]
    assert Decimal(row["spent"]) > 0
    assert Decimal(row["reserved"]) == 0
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        holds = (await session.execute(select(BudgetReservation))).scalars().all()
    # the run's creation read its first call's budget (holding nothing), then each model call held and settled
    assert sorted(h.status for h in holds) == ["settled", "settled"]
    assert sum(h.actual_chip_us or 0 for h in holds) == run["chip_us"]


async def test_a_hard_agent_budget_refuses_the_run_when_it_is_created(
    client: Any, make_tenant: Any, inline_runs: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant)
    refused = await client.post(
        "/v1/budgets",
        json={"limit_minor": 0, "scope": "agent", "scope_id": agent["id"], "hard": True},
        headers=tenant.headers("admin"),
    )
    assert refused.status_code in (200, 201), refused.text
    run = await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)
    assert run.status_code == 402, run.text  # its first model call is admitted when it is created
    assert run.json()["error"]["code"] == "budget_exceeded"
    assert "budget" in run.json()["error"]["message"].lower()
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        assert (await session.execute(select(Run))).scalars().all() == []
        assert (await session.execute(select(Thread))).scalars().all() == []
        assert (await session.execute(select(UsageEvent))).scalars().all() == []


async def test_an_agent_on_a_model_alias_is_billed_under_the_served_name(
    client: Any, make_tenant: Any, inline_runs: Any
) -> None:
    """Runs record the served name, as chat completions and responses do: one model, one invoice line."""
    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 10**9}, headers=tenant.headers("admin"))
    assert budget.status_code in (200, 201), budget.text
    agent = await make_agent(client, tenant, model="llama-3.1-8b-instruct")
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=tenant.headers("developer"))).json()
    run = await wait_for_run(client, run["thread_id"], run["id"], tenant.headers("developer"), statuses=FINAL)
    assert run["status"] == "completed", run
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        usage = (await session.execute(select(UsageEvent))).scalars().all()
        holds = (await session.execute(select(BudgetReservation))).scalars().all()
    assert usage
    assert {event.model for event in usage} == {"meta-llama/Llama-3.1-8B-Instruct"}
    assert {hold.model for hold in holds} == {"meta-llama/Llama-3.1-8B-Instruct"}
