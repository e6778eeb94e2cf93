"""Usage and budgets per workflow: every model step of a workflow run names the workflow (whichever agent acted: a
node's, or one it called as a tool), usage groups by it (JSON, CSV, roll-ups), and a workflow's
budget holds every model call of its runs, counts their spend, and is a ceiling when hard."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from switchyard.platform.billing.aggregates import refresh_aggregates
from switchyard.platform.billing.ledger import record_usage
from switchyard.platform.billing.tx import own_transaction
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.models import BudgetReservation, UsageAggregate, UsageEvent
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run
from tests.platform.billing.factories import receipt

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


async def _workflow(client: Any, tenant: Any, *nodes: dict[str, Any], start: str = "ask") -> str:
    body = {"name": "desk", "start": start, "nodes": [*nodes, {"type": "end", "id": "done"}]}
    created = await client.post("/v1/workflows", json=body, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _ask(agent_id: str) -> dict[str, Any]:
    return {"type": "agent", "id": "ask", "agent_id": agent_id, "next": "done"}


async def _run(client: Any, tenant: Any, target: str, text: str, *, statuses: Any = FINAL) -> dict[str, Any]:
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs", json={"agent_id": target, "thread": {"messages": [{"content": text}]}}, headers=headers
    )
    assert created.status_code == 201, created.text
    return dict(
        await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=statuses)
    )


async def _usage(client: Any, tenant: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        return list((await session.execute(select(UsageEvent).order_by(UsageEvent.event_id))).scalars())


async def _holds(client: Any, tenant: Any) -> list[BudgetReservation]:
    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        statement = select(BudgetReservation).order_by(BudgetReservation.created_at)
        return list((await session.execute(statement)).scalars())


async def _budget(client: Any, tenant: Any, **body: Any) -> dict[str, Any]:
    created = await client.post("/v1/budgets", json=body, headers=tenant.headers("admin"))
    assert created.status_code == 201, created.text
    return dict(created.json())


async def test_every_model_step_of_a_workflow_run_names_the_workflow_and_usage_groups_by_it(
    client: Any, make_tenant: Any
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    researcher = await make_agent(client, tenant, name="researcher", instructions="You find facts.")
    writer = await make_agent(client, tenant, name="writer", tools=[{"type": "agent", "agent_id": researcher["id"]}])
    workflow_id = await _workflow(client, tenant, _ask(writer["id"]))
    flowed = await _run(client, tenant, workflow_id, "Please ask the researcher with input=tides")
    assert flowed["status"] == "completed", flowed
    alone = await _run(client, tenant, writer["id"], "Please ask the researcher with input=tides")
    assert alone["status"] == "completed", alone

    usage = await _usage(client, tenant)
    in_workflow = [e for e in usage if e.run_id == flowed["id"]]
    # the writer, the researcher it called as a tool (on its own context), the writer again: each billed as itself
    assert [e.agent_id for e in in_workflow] == [writer["id"], researcher["id"], writer["id"]]
    assert {e.workflow_id for e in in_workflow} == {workflow_id}
    outside = [e for e in usage if e.run_id == alone["id"]]
    assert len(outside) == len(in_workflow)
    assert {e.workflow_id for e in outside} == {None}

    window = {"start_time": int(time.time()) - 3600, "group_by": "workflow_id", "bucket_width": "1d"}
    by_workflow = await client.get("/v1/usage", params=window, headers=tenant.headers("viewer"))
    assert by_workflow.status_code == 200, by_workflow.text
    rows = {r["workflow_id"]: r for bucket in by_workflow.json()["data"] for r in bucket["results"]}
    assert set(rows) == {workflow_id, None}
    assert rows[workflow_id]["chip_us"] == sum(e.chip_us for e in in_workflow) == flowed["chip_us"]
    assert rows[workflow_id]["num_model_requests"] == len(in_workflow)
    assert rows[None]["chip_us"] == sum(e.chip_us for e in outside)
    assert rows[workflow_id]["agent_id"] is None  # not grouped by

    both = await client.get(
        "/v1/usage", params={**window, "group_by": "workflow_id,agent_id"}, headers=tenant.headers("viewer")
    )
    pairs = {(r["workflow_id"], r["agent_id"]) for bucket in both.json()["data"] for r in bucket["results"]}
    assert {pair for pair in pairs if pair[0] == workflow_id} == {
        (workflow_id, writer["id"]),
        (workflow_id, researcher["id"]),
    }

    exported = await client.get("/v1/usage/export.csv", params=window, headers=tenant.headers("viewer"))
    assert exported.status_code == 200, exported.text
    lines = list(csv.DictReader(io.StringIO(exported.text)))
    assert {(r["workflow_id"], int(r["chip_us"])) for r in lines} == {
        (workflow_id, rows[workflow_id]["chip_us"]),
        ("", rows[None]["chip_us"]),
    }


async def test_roll_ups_keep_a_group_per_workflow(database: Database, new_tenant: Any) -> None:
    scope = await new_tenant()
    hour = datetime(2026, 11, 3, 5, tzinfo=UTC)
    events = [
        receipt(chip_us=10, occurred_at=hour, agent_id="agent_a", workflow_id="workflow_1"),
        receipt(chip_us=20, occurred_at=hour + timedelta(minutes=1), agent_id="agent_a", workflow_id="workflow_2"),
        receipt(chip_us=40, occurred_at=hour + timedelta(minutes=2), agent_id="agent_a"),
    ]
    async with database.unit_of_work(scope) as session:
        for event in events:
            await record_usage(session, scope=scope, event=event)
    async with own_transaction(database, UNSCOPED) as session:
        assert await refresh_aggregates(session, tenant_id=scope.tenant_id, hours=[hour]) == 6  # 3 groups, hour + day
    async with database.unit_of_work(scope) as session:
        found = (await session.execute(select(UsageAggregate).where(UsageAggregate.bucket_width == "1h"))).scalars()
        assert sorted((r.agent_id, r.workflow_id, r.chip_us) for r in found) == [
            ("agent_a", "", 40),  # outside any workflow
            ("agent_a", "workflow_1", 10),
            ("agent_a", "workflow_2", 20),
        ]


async def test_a_workflow_budget_holds_every_call_of_its_runs_and_counts_their_spend(
    client: Any, make_tenant: Any
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    researcher = await make_agent(client, tenant, name="researcher")
    writer = await make_agent(client, tenant, name="writer", tools=[{"type": "agent", "agent_id": researcher["id"]}])
    workflow_id = await _workflow(client, tenant, _ask(writer["id"]))
    budget = await _budget(client, tenant, limit_minor=10**9, scope="workflow", scope_id=workflow_id, hard=False)
    assert (budget["scope"], budget["scope_id"]) == ("workflow", workflow_id)
    run = await _run(client, tenant, workflow_id, "Ask the researcher with input=tides")
    assert run["status"] == "completed", run
    outside = await _run(client, tenant, writer["id"], "Ask the researcher with input=tides")  # not the workflow's
    assert outside["status"] == "completed", outside

    usage = await _usage(client, tenant)
    calls = [e for e in usage if e.run_id == run["id"]]
    assert len(calls) == 3  # the writer, the researcher as its tool, the writer again
    holds = await _holds(client, tenant)
    held = [h for h in holds if budget["id"] in h.budget_ids]
    # the run's creation read it for its first call (holding nothing), then each model call of the run held it,
    # whichever agent made it; the writer's own run held it for none
    assert sorted(h.status for h in held) == ["settled", "settled", "settled"]
    assert sorted(h.agent_id for h in held if h.status == "settled") == sorted(e.agent_id for e in calls)
    assert sum(h.actual_chip_us or 0 for h in held) == run["chip_us"]
    spent = Decimal((await client.get(f"/v1/budgets/{budget['id']}", headers=tenant.headers("admin"))).json()["spent"])
    assert spent > 0

    # set again from nothing, a workflow budget starts at what the workflow's runs spent this month (the ledger)
    removed = await client.delete(f"/v1/budgets/{budget['id']}", headers=tenant.headers("admin"))
    assert removed.status_code == 200, removed.text
    again = await _budget(client, tenant, limit_minor=10**9, scope="workflow", scope_id=workflow_id, hard=False)
    assert abs(Decimal(again["spent"]) - spent) <= Decimal("0.000001") * len(calls)  # rounded once, not per call


async def test_a_hard_workflow_budget_is_a_ceiling_for_its_runs_alone(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    await _budget(client, tenant, limit_minor=10**9, hard=False)  # the tenant has budgets: every call is held
    agent = await make_agent(client, tenant)
    approve_first = {"type": "user_approval", "id": "confirm", "message": "Go?", "approved": "ask", "rejected": "done"}
    workflow_id = await _workflow(client, tenant, approve_first, _ask(agent["id"]), start="confirm")
    headers = tenant.headers("developer")
    waiting = await _run(client, tenant, workflow_id, "hello", statuses={"requires_action"})
    (approval,) = waiting["required_action"]["approval"]["tool_calls"]

    ceiling = await _budget(client, tenant, limit_minor=0, scope="workflow", scope_id=workflow_id, hard=True)
    decided = await client.post(
        f"/v1/threads/{waiting['thread_id']}/runs/{waiting['id']}/approvals",
        json={"approvals": [{"tool_call_id": approval["id"], "approve": True}]},
        headers=headers,
    )
    assert decided.status_code == 200, decided.text
    failed = await wait_for_run(client, waiting["thread_id"], waiting["id"], headers, statuses=FINAL)
    assert failed["status"] == "failed", failed
    assert failed["last_error"]["code"] == "budget_exceeded"
    assert f"workflow budget for {workflow_id}" in failed["last_error"]["message"]
    assert ceiling["id"] in failed["last_error"]["message"]
    assert await _usage(client, tenant) == []  # refused before any compute

    refused = await client.post(
        "/v1/runs", json={"agent_id": workflow_id, "thread": {"messages": [{"content": "hi"}]}}, headers=headers
    )
    assert refused.status_code == 402, refused.text  # a new run's first call is admitted when it is created
    assert refused.json()["error"]["code"] == "budget_exceeded"
    assert f"workflow budget for {workflow_id}" in refused.json()["error"]["message"]

    alone = await _run(client, tenant, agent["id"], "hello")  # the same agent outside the workflow: not its budget
    assert alone["status"] == "completed", alone


async def test_a_workflow_budget_names_a_workflow_of_the_tenant(client: Any, make_tenant: Any) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    agent = await make_agent(client, tenant)
    workflow_id = await _workflow(client, tenant, _ask(agent["id"]))
    theirs = await _workflow(client, other, _ask((await make_agent(client, other))["id"]))
    for scope, scope_id in [
        ("workflow", "workflow_missing"),
        ("workflow", theirs),  # another tenant's reads as unknown
        ("workflow", agent["id"]),  # an agent is not a workflow
        ("agent", workflow_id),  # nor a workflow an agent: its budget is of scope workflow
        ("workflow", ""),
    ]:
        body = {"limit_minor": 100, "scope": scope, "scope_id": scope_id}
        response = await client.post("/v1/budgets", json=body, headers=tenant.headers("admin"))
        assert response.status_code == 400, (scope, scope_id, response.text)
        error = response.json()["error"]
        assert (error["param"], error["code"]) == ("scope_id", "invalid_value"), error
    await client.delete(f"/v1/workflows/{workflow_id}", headers=tenant.headers("developer"))
    deleted = await client.post(
        "/v1/budgets",
        json={"limit_minor": 100, "scope": "workflow", "scope_id": workflow_id},
        headers=tenant.headers("admin"),
    )
    assert deleted.status_code == 400, deleted.text
