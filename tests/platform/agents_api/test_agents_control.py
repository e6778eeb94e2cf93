"""Controlling runs: approvals (granted and denied), multitask strategies, cancel while queued."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from switchyard.agents import FunctionModel, Message, ModelRequest, ToolCall
from switchyard.platform.db import TenantScope
from switchyard.platform.models import AuditEvent
from tests.platform.agents_api.factories import make_agent, run_inline, scripted_model, wait_for_run

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


def _calculator_model(_tenant: str, _thread: str) -> Any:
    def answer(request: ModelRequest) -> Message:
        last = request.messages[-1]
        if last.role == "tool":
            return Message.assistant(f"Result: {last.content}")
        return Message.assistant(None, [ToolCall(id="call_1", name="calculator", arguments='{"expression": "6*7"}')])

    return FunctionModel(answer, chip_us_per_token=3)


async def _approval_run(client: Any, tenant: Any, headers: dict[str, str]) -> tuple[str, str]:
    agent = await make_agent(client, tenant, tools=[{"type": "calculator", "requires_approval": True}])
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    waiting = await wait_for_run(client, run["thread_id"], run["id"], headers, statuses={"requires_action"})
    assert waiting["required_action"]["type"] == "approval"
    assert [c["id"] for c in waiting["required_action"]["approval"]["tool_calls"]] == ["call_1"]
    return run["thread_id"], run["id"]


async def test_approvals(client: Any, make_tenant: Any) -> None:
    run_inline(client, model_factory=_calculator_model)
    tenant = await make_tenant()
    headers = tenant.headers("developer")

    thread_id, run_id = await _approval_run(client, tenant, headers)
    base = f"/v1/threads/{thread_id}/runs/{run_id}"
    wrong = await client.post(
        f"{base}/approvals", json={"approvals": [{"tool_call_id": "x", "approve": True}]}, headers=headers
    )
    assert wrong.status_code == 400
    outputs = await client.post(
        f"{base}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "call_1", "output": "1"}]},
        headers=headers,
    )
    assert outputs.status_code == 409  # it waits for an approval, not for outputs
    granted = await client.post(
        f"{base}/approvals", json={"approvals": [{"tool_call_id": "call_1", "approve": True}]}, headers=headers
    )
    assert granted.status_code == 200, granted.text
    done = await wait_for_run(client, thread_id, run_id, headers, statuses=FINAL)
    assert done["status"] == "completed"
    messages = (await client.get(f"/v1/threads/{thread_id}/messages", headers=headers)).json()["data"]
    assert messages[0]["content"] == 'Result: {"result": 42}'

    thread_id, run_id = await _approval_run(client, tenant, headers)
    denied = await client.post(
        f"/v1/threads/{thread_id}/runs/{run_id}/approvals",
        json={"approvals": [{"tool_call_id": "call_1", "approve": False}]},
        headers=headers,
    )
    assert denied.status_code == 200
    await wait_for_run(client, thread_id, run_id, headers, statuses=FINAL)
    steps = (await client.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps?order=asc", headers=headers)).json()
    tool_step = next(s for s in steps["data"] if s["type"] == "tool_call")
    assert tool_step["step_details"]["is_error"] is True  # denied: never executed

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        audited = (
            (await session.execute(select(AuditEvent).where(AuditEvent.action == "run.approvals"))).scalars().all()
        )
    assert sorted(a.details["decisions"]["call_1"] for a in audited) == [False, True]


async def test_multitask_enqueue_and_interrupt(client: Any, make_tenant: Any) -> None:
    run_inline(client, model_factory=scripted_model)
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    waiting_agent = await make_agent(client, tenant, tools=[{"type": "function", "name": "lookup"}])
    plain_agent = await make_agent(client, tenant)
    thread = (await client.post("/v1/threads", json={"messages": [{"content": "hi"}]}, headers=headers)).json()
    base = f"/v1/threads/{thread['id']}/runs"

    first = (await client.post(base, json={"agent_id": waiting_agent["id"]}, headers=headers)).json()
    await wait_for_run(client, thread["id"], first["id"], headers, statuses={"requires_action"})
    queued = await client.post(
        base, json={"agent_id": plain_agent["id"], "multitask_strategy": "enqueue"}, headers=headers
    )
    assert queued.status_code == 201
    second = queued.json()
    await asyncio.sleep(0.3)  # its worker found a run ahead of it and left it queued
    assert (await client.get(f"{base}/{second['id']}", headers=headers)).json()["status"] == "queued"

    # answering the first run lets it finish, which starts the queued one
    await client.post(
        f"{base}/{first['id']}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "call_1", "output": "found"}]},
        headers=headers,
    )
    assert (await wait_for_run(client, thread["id"], second["id"], headers, statuses=FINAL))["status"] == "completed"

    third = (await client.post(base, json={"agent_id": waiting_agent["id"]}, headers=headers)).json()
    await wait_for_run(client, thread["id"], third["id"], headers, statuses={"requires_action"})
    fourth = await client.post(
        base, json={"agent_id": plain_agent["id"], "multitask_strategy": "interrupt"}, headers=headers
    )
    assert fourth.status_code == 201
    assert (await client.get(f"{base}/{third['id']}", headers=headers)).json()["status"] == "cancelled"
    done = await wait_for_run(client, thread["id"], fourth.json()["id"], headers, statuses=FINAL)
    assert done["status"] == "completed"

    messages = (await client.get(f"/v1/threads/{thread['id']}/messages?order=asc", headers=headers)).json()["data"]
    # the queued run saw the first run's messages: its answer comes after them in the thread
    run_of = [m["run_id"] for m in messages]
    assert run_of.index(second["id"]) > max(i for i, r in enumerate(run_of) if r == first["id"])


async def test_cancel_of_a_queued_run_needs_no_worker(client: Any, make_tenant: Any) -> None:
    sent: list[str] = []

    class Nowhere:
        def send_task(self, name: str, args: list[str]) -> None:
            sent.append(args[1])

    client.app.state.jobs = Nowhere()
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant)
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    assert sent == [run["id"]]  # dispatched after the commit
    cancelled = await client.post(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/cancel", headers=headers)
    assert cancelled.json()["status"] == "cancelled"
    events = await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/events", headers=headers)
    assert "event: thread.run.cancelled" in events.text
