"""Agents, threads, runs over HTTP: versions, execution on the pool, tool outputs, cancel, limits, SSE."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from switchyard.platform.db import TenantScope
from switchyard.platform.models import AuditEvent, UsageEvent
from tests.platform.agents_api.factories import MODEL, make_agent, run_inline, scripted_model, wait_for_run

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


def parse_sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if fields:
            events.append(fields)
    return events


async def test_agent_versions(client: Any, tenant: Any) -> None:
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    assert agent["object"] == "agent"
    assert agent["version"] == 1
    assert agent["tools"][0]["type"] == "calculator"

    changed = await client.patch(f"/v1/agents/{agent['id']}", json={"instructions": "Be kind."}, headers=headers)
    assert changed.status_code == 200, changed.text
    assert changed.json()["version"] == 2
    assert changed.json()["instructions"] == "Be kind."
    same = await client.patch(f"/v1/agents/{agent['id']}", json={"instructions": "Be kind."}, headers=headers)
    assert same.json()["version"] == 2  # no effective change, no new version
    reset = await client.patch(f"/v1/agents/{agent['id']}", json={"instructions": None}, headers=headers)
    assert reset.json()["version"] == 3
    assert reset.json()["instructions"] == ""
    refused = await client.patch(f"/v1/agents/{agent['id']}", json={"name": None}, headers=headers)
    assert refused.status_code == 400

    versions = await client.get(f"/v1/agents/{agent['id']}/versions?order=asc", headers=headers)
    assert [v["version"] for v in versions.json()["data"]] == [1, 2, 3]
    assert versions.json()["data"][1]["instructions"] == "Be kind."

    unknown = await client.post("/v1/agents", json={"name": "x", "model": "no/such-model"}, headers=headers)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    bad_tool = await client.post(
        "/v1/agents", json={"name": "x", "model": MODEL, "tools": [{"type": "nope"}]}, headers=headers
    )
    assert bad_tool.status_code == 400

    deleted = await client.delete(f"/v1/agents/{agent['id']}", headers=headers)
    assert deleted.json() == {"object": "agent.deleted", "id": agent["id"], "deleted": True}
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=headers)).status_code == 404

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        actions = (await session.execute(select(AuditEvent.action).where(AuditEvent.target_id == agent["id"]))).all()
    assert sorted(a for (a,) in actions) == ["agent.create", "agent.delete", "agent.update", "agent.update"]


async def test_an_agent_asks_no_more_output_tokens_than_a_request_may(client: Any, tenant: Any) -> None:
    """``model_params.max_tokens`` above ``SWITCHYARD_MAX_OUTPUT_TOKENS`` is refused when the agent is saved
    (it was stored, and each run failed with a nonsense 'tokens left' message)."""
    headers = tenant.headers("developer")
    cap = client.app.state.settings.max_output_tokens
    body = {"name": "x", "model": MODEL, "model_params": {"max_tokens": cap + 1}}
    refused = await client.post("/v1/agents", json=body, headers=headers)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "model_params.max_tokens"
    assert str(cap) in refused.json()["error"]["message"]
    agent = await make_agent(client, tenant, model_params={"max_tokens": cap})
    changed = await client.patch(
        f"/v1/agents/{agent['id']}", json={"model_params": {"max_tokens": 10**20}}, headers=headers
    )
    assert changed.status_code == 400, changed.text
    assert (await client.get(f"/v1/agents/{agent['id']}", headers=headers)).json()["version"] == 1


async def test_run_on_the_pool_bills_each_model_step_once(client: Any, tenant: Any, inline_runs: Any) -> None:
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    created = await client.post(
        "/v1/runs",
        json={"agent_id": agent["id"], "thread": {"messages": [{"content": "use the calculator please"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    run = created.json()
    assert run["object"] == "thread.run"
    assert run["agent_version"] == 1
    run = await wait_for_run(client, run["thread_id"], run["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run

    steps = (
        await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/steps?order=asc", headers=headers)
    ).json()
    kinds = [s["type"] for s in steps["data"]]
    assert kinds == ["model_call", "tool_call", "model_call"]
    model_steps = [s for s in steps["data"] if s["type"] == "model_call"]
    assert all(s["step_details"]["chip_us"] > 0 for s in model_steps)
    assert run["chip_us"] == sum(s["step_details"]["chip_us"] for s in model_steps)
    assert run["usage"]["total_tokens"] > 0

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        usage = (await session.execute(select(UsageEvent).where(UsageEvent.run_id == run["id"]))).scalars().all()
    assert sorted(u.event_id for u in usage) == sorted(s["id"] for s in model_steps)
    assert {u.agent_id for u in usage} == {agent["id"]}
    assert {u.agent_version for u in usage} == {1}
    assert all(u.api_key_id and u.api_key_id.startswith("key_") for u in usage)

    messages = (await client.get(f"/v1/threads/{run['thread_id']}/messages?order=asc", headers=headers)).json()
    roles = [m["role"] for m in messages["data"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert messages["data"][-1]["run_id"] == run["id"]

    # the final answer was announced (created, in_progress), then streamed as deltas, then completed, as OpenAI's
    # stream orders them (deltas used to come before their message's created event)
    events = parse_sse(
        (await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/events", headers=headers)).text
    )
    final = messages["data"][-1]
    deltas = [json.loads(e["data"]) for e in events if e.get("event") == "thread.message.delta"]
    assert deltas
    assert {d["id"] for d in deltas} == {final["id"]}
    assert "".join(d["delta"]["content"] for d in deltas) == final["content"]
    of_final = [
        e["event"]
        for e in events
        if e.get("data", "").startswith("{") and json.loads(e["data"]).get("id") == final["id"]
    ]
    first_delta = of_final.index("thread.message.delta")
    assert of_final[:first_delta] == ["thread.message.created", "thread.message.in_progress"]
    assert set(of_final[first_delta:-1]) == {"thread.message.delta"}
    assert of_final[-1] == "thread.message.completed"
    assert [int(e["id"]) for e in events[:-1]] == list(range(1, len(events)))


async def test_function_tool_outputs_and_events(client: Any, tenant: Any) -> None:
    run_inline(client, model_factory=scripted_model)
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "function", "name": "lookup"}])
    thread = (await client.post("/v1/threads", json={"messages": [{"content": "hi"}]}, headers=headers)).json()
    base = f"/v1/threads/{thread['id']}/runs"
    run = (await client.post(base, json={"agent_id": agent["id"]}, headers=headers)).json()
    run = await wait_for_run(client, thread["id"], run["id"], headers, statuses={"requires_action"})
    calls = run["required_action"]["submit_tool_outputs"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1"]

    # the thread is busy: a second run is refused, and so is a new message
    busy = await client.post(base, json={"agent_id": agent["id"]}, headers=headers)
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "thread_has_active_run"
    blocked = await client.post(f"/v1/threads/{thread['id']}/messages", json={"content": "x"}, headers=headers)
    assert blocked.status_code == 409

    unknown = await client.post(
        f"{base}/{run['id']}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "call_9", "output": "x"}]},
        headers=headers,
    )
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == "unknown_tool_call"
    submitted = await client.post(
        f"{base}/{run['id']}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "call_1", "output": "forty-two"}]},
        headers=headers,
    )
    assert submitted.status_code == 200, submitted.text
    run = await wait_for_run(client, thread["id"], run["id"], headers, statuses=FINAL)
    assert run["status"] == "completed"
    again = await client.post(
        f"{base}/{run['id']}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "call_1", "output": "forty-two"}]},
        headers=headers,
    )
    assert again.status_code == 409  # outputs accepted once

    stream = await client.get(f"{base}/{run['id']}/events", headers=headers)
    assert stream.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(stream.text)
    assert events[-1] == {"event": "done", "data": "[DONE]"}
    numbered = events[:-1]
    assert [int(e["id"]) for e in numbered] == list(range(1, len(numbered) + 1))
    assert all(json.loads(e["data"])["sequence_number"] == int(e["id"]) for e in numbered)
    names = [e["event"] for e in numbered]
    assert names[:2] == ["thread.run.created", "thread.run.queued"]
    assert "thread.run.requires_action" in names
    assert names[-1] == "thread.run.completed"
    assert names.count("thread.run.step.created") == names.count("thread.run.step.completed") == 3
    final_message = [json.loads(e["data"]) for e in numbered if e["event"] == "thread.message.completed"][-1]
    assert final_message["content"] == "The tool said: forty-two"
    objects = {e["event"].rsplit(".", 1)[0]: json.loads(e["data"])["object"] for e in numbered}
    assert objects == {
        "thread.run": "thread.run",
        "thread.run.step": "thread.run.step",
        "thread.message": "thread.message",
    }

    resumed = parse_sse((await client.get(f"{base}/{run['id']}/events?starting_after=5", headers=headers)).text)
    assert [int(e["id"]) for e in resumed[:-1]] == list(range(6, len(numbered) + 1))
    by_header = parse_sse(
        (await client.get(f"{base}/{run['id']}/events", headers=headers | {"Last-Event-ID": "7"})).text
    )
    assert int(by_header[0]["id"]) == 8


async def test_stream_on_creation_cancel_and_limits(client: Any, tenant: Any) -> None:
    run_inline(client, model_factory=scripted_model)
    headers = tenant.headers("developer")
    looping = await make_agent(client, tenant, tools=[{"type": "calculator"}], limits={"max_steps": 1})
    response = await client.post(
        "/v1/runs",
        json={"agent_id": looping["id"], "stream": True, "thread": {"messages": [{"content": "go"}]}},
        headers=headers,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    assert events[-1]["event"] == "done"
    last = json.loads(events[-2]["data"])
    assert events[-2]["event"] == "thread.run.incomplete"
    assert last["incomplete_reason"] == "max_steps"
    run = (await client.get(f"/v1/threads/{last['thread_id']}/runs/{last['id']}", headers=headers)).json()
    assert run["status"] == "incomplete"
    assert run["incomplete_details"] == {"reason": "max_steps"}

    waiting = await make_agent(client, tenant, tools=[{"type": "function", "name": "lookup"}])
    created = (await client.post("/v1/runs", json={"agent_id": waiting["id"]}, headers=headers)).json()
    await wait_for_run(client, created["thread_id"], created["id"], headers, statuses={"requires_action"})
    path = f"/v1/threads/{created['thread_id']}/runs/{created['id']}/cancel"
    first = await client.post(path, headers=headers)
    second = await client.post(path, headers=headers)
    assert first.json()["status"] == second.json()["status"] == "cancelled"
    foreign = await client.post("/v1/runs", json={"agent_id": "agent_01nonexistent"}, headers=headers)
    assert foreign.status_code == 404


async def test_an_agent_with_an_output_schema_answers_json_of_it_on_the_pool(
    client: Any, tenant: Any, inline_runs: Any
) -> None:
    headers = tenant.headers("developer")
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "refund": {"type": "boolean"}},
        "required": ["order_id", "refund"],
        "additionalProperties": False,
    }
    agent = await make_agent(client, tenant, output_schema={"name": "decision", "schema": schema})
    assert agent["output_schema"] == {"name": "decision", "schema": schema, "strict": True}
    created = await client.post(
        "/v1/runs",
        json={"agent_id": agent["id"], "thread": {"messages": [{"content": "order A-7 arrived broken"}]}},
        headers=headers,
    )
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run
    messages = (await client.get(f"/v1/threads/{run['thread_id']}/messages", headers=headers)).json()["data"]
    answer = json.loads(messages[0]["content"])  # newest first: the answer, as JSON of the schema
    assert set(answer) == {"order_id", "refund"}
    assert isinstance(answer["refund"], bool)

    refused = await client.patch(
        f"/v1/agents/{agent['id']}", json={"output_schema": {"schema": {"type": "array"}}}, headers=headers
    )
    assert refused.status_code == 400
    assert "type 'object'" in refused.json()["error"]["message"]
    removed = await client.patch(f"/v1/agents/{agent['id']}", json={"output_schema": None}, headers=headers)
    assert removed.json()["output_schema"] is None
    assert removed.json()["version"] == 2
