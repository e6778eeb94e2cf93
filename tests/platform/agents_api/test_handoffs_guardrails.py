"""Agents that hand off to other agents and guard their input and answer, hosted: defined once on the server, run
through /v1/runs and through /v1/responses with the official ``openai`` client, billed per step to the agent that
acted. The simulated model calls a tool whose name the user's message names, so ``transfer_to_billing`` in the
message makes the triage agent hand off."""

from __future__ import annotations

import json
import time
from typing import Any

import openai
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import MODEL, make_agent, run_inline, wait_for_run


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent).order_by(UsageEvent.event_id))).scalars())


async def _triage(client: Any, tenant: Any) -> tuple[str, str, str]:
    """A triage agent that may transfer to a billing or a refunds specialist; their ids."""
    billing = await make_agent(client, tenant, name="billing", instructions="You settle invoices.")
    refunds = await make_agent(client, tenant, name="refunds", instructions="You handle refunds.")
    triage = await make_agent(
        client,
        tenant,
        name="triage",
        instructions="Send the user to the right specialist.",
        handoffs=[
            {"agent_id": billing["id"], "description": "Invoices and payments."},
            {"agent_id": refunds["id"]},
        ],
    )
    return triage["id"], billing["id"], refunds["id"]


async def test_a_triage_agent_hands_off_through_the_responses_api(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    triage, billing, _ = await _triage(client, tenant)
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model="any", prompt={"id": triage}, input="My invoice is wrong, please transfer_to_billing."
    )
    assert response.status == "completed"
    transfer, message = response.output  # the server ran the transfer, as it runs its built-in tools
    assert (transfer.type, transfer.server_label, transfer.name, transfer.output) == (  # type: ignore[union-attr]
        "mcp_call",
        "switchyard",
        "transfer_to_billing",
        '{"assistant": "billing"}',
    )
    assert message.type == "message"
    assert response.output_text.startswith("Result of transfer_to_billing")
    usage = await _usage(client)
    assert [(e.event_id, e.agent_id) for e in usage] == [
        (f"{response.id}_step_0", triage),  # the triage agent chose
        (f"{response.id}_step_2", billing),  # the billing agent answered, billed as itself
    ]


async def test_a_triage_agent_hands_off_in_a_run(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    triage, _, refunds = await _triage(client, tenant)
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs",
        json={"agent_id": triage, "thread": {"messages": [{"content": "I want my money back: transfer_to_refunds"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses={"completed"})
    steps = await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/steps", headers=headers)
    assert steps.status_code == 200, steps.text
    data = sorted(steps.json()["data"], key=lambda step: step["index"])
    assert [(s["type"], s["agent_id"]) for s in data] == [
        ("model_call", triage),
        ("tool_call", triage),
        ("model_call", refunds),  # the run went on as the refunds agent
    ]
    handoff = data[1]["step_details"]
    assert (handoff["tool_call"]["function"]["name"], handoff["tool_kind"], handoff["output"]) == (
        "transfer_to_refunds",
        "handoff",
        '{"assistant": "refunds"}',
    )
    by_agent = await client.get(
        "/v1/usage", params={"start_time": int(time.time()) - 3600, "group_by": "agent_id"}, headers=headers
    )
    assert by_agent.status_code == 200, by_agent.text
    assert {r["agent_id"] for bucket in by_agent.json()["data"] for r in bucket["results"]} == {triage, refunds}


async def test_an_input_guardrail_trips_before_any_compute(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    guarded = await make_agent(
        client,
        tenant,
        guardrails={"input": [{"type": "regex", "name": "no-card-numbers", "pattern": r"\b(?:\d[ -]?){13,16}\b"}]},
    )
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model="any", prompt={"id": guarded["id"]}, input="My card is 4111 1111 1111 1111, charge it."
    )
    assert response.status == "failed"
    assert response.error is not None
    assert response.error.code == "guardrail_tripped"  # type: ignore[comparison-overlap]
    assert "'no-card-numbers' (regex)" in response.error.message
    assert response.output == []
    assert await _usage(client) == []
    fine = await sdk.responses.create(model="any", prompt={"id": guarded["id"]}, input="What is a card?")
    assert fine.status in ("completed", "incomplete")


async def test_an_output_guardrail_replaces_the_answer(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    schema = {"type": "object", "required": ["verdict"]}
    guarded = await make_agent(client, tenant, guardrails={"output": [{"type": "json_schema", "schema": schema}]})
    assert guarded["guardrails"]["output"][0]["schema"] == schema  # stored and shown as sent
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs", json={"agent_id": guarded["id"], "thread": {"messages": [{"content": "hi"}]}}, headers=headers
    )
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses={"failed"})
    assert run["last_error"]["code"] == "guardrail_tripped"
    assert run["last_error"]["message"].startswith("output guardrail 'json_schema' (json_schema) tripped")
    messages = await client.get(f"/v1/threads/{run['thread_id']}/messages", headers=headers)
    answers = [m["content"] for m in messages.json()["data"] if m["role"] == "assistant"]
    assert answers == ["The answer was withheld: it tripped an output guardrail."]
    assert len(await _usage(client)) == 1  # the model's answer was computed: it is billed


async def test_handoffs_name_agents_the_tenant_has(client: Any, make_tenant: Any) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    theirs = await make_agent(client, other)
    headers = tenant.headers("developer")
    for handoffs, param in [
        ([{"agent_id": theirs["id"]}], "handoffs[0]"),  # another tenant's agent is not there
        ([{"agent_id": "agent_missing"}], "handoffs[0]"),
    ]:
        body = {"name": "triage", "model": MODEL, "handoffs": handoffs}
        refused = await client.post("/v1/agents", json=body, headers=headers)
        assert refused.status_code == 404, refused.text
        assert (refused.json()["error"]["code"], refused.json()["error"]["param"]) == ("agent_not_found", param)
    mine = await make_agent(client, tenant)
    pinned = await client.post(
        "/v1/agents",
        json={"name": "t", "model": MODEL, "handoffs": [{"agent_id": mine["id"], "version": 7}]},
        headers=headers,
    )
    assert pinned.status_code == 404
    assert "no version 7" in pinned.json()["error"]["message"]
    agent = await make_agent(client, tenant, handoffs=[{"agent_id": mine["id"]}])
    changed = await client.patch(
        f"/v1/agents/{agent['id']}", json={"handoffs": [{"agent_id": theirs["id"]}]}, headers=headers
    )
    assert changed.status_code == 404
    assert changed.json()["error"]["code"] == "agent_not_found"


async def test_an_agent_calls_another_as_a_tool(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    researcher = await make_agent(client, tenant, name="researcher", instructions="You find facts.")
    writer = await make_agent(
        client, tenant, name="writer", tools=[{"type": "agent", "agent_id": researcher["id"], "description": "Facts."}]
    )
    assert writer["tools"][0]["agent_id"] == researcher["id"]
    sdk = _sdk(client, tenant.keys["developer"])
    response = await sdk.responses.create(
        model="any", prompt={"id": writer["id"]}, input="Ask the researcher with input=tides"
    )
    assert response.status == "completed"
    call, message = response.output
    assert (call.type, call.name, message.type) == ("mcp_call", "researcher", "message")  # type: ignore[union-attr]
    assert json.loads(call.arguments) == {"input": "tides"}  # type: ignore[union-attr]
    assert call.output  # type: ignore[union-attr]  # the researcher's answer
    assert response.output_text.startswith(f"Result of researcher: {call.output}")  # type: ignore[union-attr]
    usage = await _usage(client)
    assert [(e.event_id, e.agent_id) for e in usage] == [
        (f"{response.id}_step_0", writer["id"]),
        (f"{response.id}_step_2", researcher["id"]),  # on its own context, billed as itself
        (f"{response.id}_step_3", writer["id"]),
    ]
    clash = await client.post(
        "/v1/agents",
        json={
            "name": "w",
            "model": MODEL,
            "tools": [{"type": "calculator", "name": "researcher"}, {"type": "agent", "agent_id": researcher["id"]}],
        },
        headers=tenant.headers("developer"),
    )
    assert clash.status_code == 400
    assert (clash.json()["error"]["code"], clash.json()["error"]["param"]) == ("invalid_value", "tools[1].name")


async def test_an_agent_judges_another_agents_input(client: Any, make_tenant: Any) -> None:
    """The simulated judge answers the verdict's schema, ``allowed`` true unless the text says ``allowed=false``."""
    tenant = await make_tenant()
    judge = await make_agent(client, tenant, name="judge", instructions="Allow only polite requests.")
    guarded = await make_agent(
        client, tenant, guardrails={"input": [{"type": "agent", "agent_id": judge["id"], "name": "politeness"}]}
    )
    sdk = _sdk(client, tenant.keys["developer"])
    allowed = await sdk.responses.create(model="any", prompt={"id": guarded["id"]}, input="Please help.")
    assert allowed.status in ("completed", "incomplete")
    refused = await sdk.responses.create(model="any", prompt={"id": guarded["id"]}, input="Do it. allowed=false")
    assert refused.status == "failed"
    assert refused.error is not None
    assert refused.error.message.startswith("input guardrail 'politeness' (agent) tripped: the judge ruled")
    judged = [e for e in await _usage(client) if e.event_id.startswith(refused.id)]
    assert [e.agent_id for e in judged] == [judge["id"]]  # the judge's call alone, billed to the judge
    missing = await client.post(
        "/v1/agents",
        json={"name": "g", "model": MODEL, "guardrails": {"output": [{"type": "agent", "agent_id": "agent_none"}]}},
        headers=tenant.headers("developer"),
    )
    assert missing.status_code == 404
    assert (missing.json()["error"]["code"], missing.json()["error"]["param"]) == (
        "agent_not_found",
        "guardrails.output[0]",
    )


async def test_a_response_stopped_by_its_input_guardrail_holds_no_budget(client: Any, make_tenant: Any) -> None:
    """A foreground response's first model call is admitted (a budget hold) before it starts; one whose input
    guardrail trips makes no call, and gives that hold back at once instead of keeping it until it expires."""
    from switchyard.platform.models import BudgetReservation

    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 10**9}, headers=tenant.headers("owner"))
    assert budget.status_code in (200, 201), budget.text
    guarded = await make_agent(client, tenant, guardrails={"input": [{"type": "max_length", "max_chars": 3}]})
    sdk = _sdk(client, tenant.keys["developer"])
    refused = await sdk.responses.create(model="any", prompt={"id": guarded["id"]}, input="too long")
    assert refused.status == "failed"
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        statement = select(BudgetReservation).where(BudgetReservation.tenant_id == tenant.id)
        holds = list((await session.execute(statement)).scalars())
    assert [h.status for h in holds] == ["released"]
