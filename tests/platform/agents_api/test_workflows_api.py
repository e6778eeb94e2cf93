"""Workflows hosted: defined once on the server (versioned, checked whole), run through /v1/runs (with its
approval) and through /v1/responses with the official ``openai`` client, each agent node's steps billed to its
agent."""

from __future__ import annotations

from typing import Any

import openai
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run


def _refund_desk(writer: str, general: str) -> dict[str, Any]:
    """Refund requests get a reply drafted twice and approved by a person; anything else goes to a generalist."""
    return {
        "name": "refund-desk",
        "start": "route",
        "state": {"rounds": {"type": "integer", "default": 0}, "draft": {"type": "string", "default": ""}},
        "nodes": [
            {"type": "if_else", "id": "route", "condition": "contains(lower(input), 'refund')", "then": "drafting",
             "else": "general"},
            {"type": "while", "id": "drafting", "condition": "state.rounds < 2", "body": "draft",
             "max_iterations": 3, "next": "review"},
            {"type": "agent", "id": "draft", "agent_id": writer, "input": "Draft {{ state.rounds + 1 }}: {{ input }}",
             "output_to": "draft", "next": "count"},
            {"type": "set_state", "id": "count", "assignments": {"rounds": "state.rounds + 1"}, "next": "drafting"},
            {"type": "user_approval", "id": "review", "message": "Send this? {{ state.draft }}", "approved": "done",
             "rejected": "general"},
            {"type": "agent", "id": "general", "agent_id": general, "next": "done"},
            {"type": "end", "id": "done", "output": "{{ state.draft or last_output }}"},
        ],
    }  # fmt: skip


async def _define(client: Any, tenant: Any) -> tuple[dict[str, Any], str, str]:
    writer = (await make_agent(client, tenant, name="writer", instructions="You draft replies."))["id"]
    general = (await make_agent(client, tenant, name="general", instructions="You answer anything."))["id"]
    created = await client.post(
        "/v1/workflows", json=_refund_desk(writer, general), headers=tenant.headers("developer")
    )
    assert created.status_code == 201, created.text
    return created.json(), writer, general


async def _usage(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent).order_by(UsageEvent.event_id))).scalars())


async def test_a_workflow_runs_its_graph_waits_for_approval_and_answers(client: Any, make_tenant: Any) -> None:
    run_inline(client)
    tenant = await make_tenant()
    workflow, writer, _ = await _define(client, tenant)
    assert (workflow["object"], workflow["version"], workflow["nodes"][0]["else"]) == ("workflow", 1, "general")
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs",
        json={"workflow_id": workflow["id"], "thread": {"messages": [{"content": "I want a refund, please"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    thread_id, run_id = created.json()["thread_id"], created.json()["id"]
    waiting = await wait_for_run(client, thread_id, run_id, headers, statuses={"requires_action"})
    (approval,) = waiting["required_action"]["approval"]["tool_calls"]
    assert approval["function"]["name"] == "approve_review"
    steps = await client.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps", headers=headers)
    nodes = sorted((s for s in steps.json()["data"] if s["type"] == "tool_call"), key=lambda s: s["index"])
    assert [n["step_details"]["tool_call"]["function"]["name"] for n in nodes] == [
        "draft",
        "draft",
    ]  # the loop ran twice
    decided = await client.post(
        f"/v1/threads/{thread_id}/runs/{run_id}/approvals",
        json={"approvals": [{"tool_call_id": approval["id"], "approve": True}]},
        headers=headers,
    )
    assert decided.status_code == 200, decided.text
    done = await wait_for_run(client, thread_id, run_id, headers, statuses={"completed"})
    messages = await client.get(f"/v1/threads/{thread_id}/messages", headers=headers)
    answer = next(m for m in messages.json()["data"] if m["role"] == "assistant")
    assert answer["content"] == nodes[-1]["step_details"]["output"]  # the last draft, as the end node says
    assert done["agent_id"] == workflow["id"]
    billed = [e.agent_id for e in await _usage(client)]
    assert billed == [writer, writer]  # each draft's model step, billed to the writer, once


async def test_a_workflow_answers_through_the_responses_api(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    workflow, _, general = await _define(client, tenant)
    sdk = openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys["developer"], http_client=client, max_retries=0
    )
    response = await sdk.responses.create(model="any", prompt={"id": workflow["id"]}, input="How do I log in?")
    assert response.status == "completed"
    call, message = response.output
    assert (call.type, call.name) == ("mcp_call", "general")  # type: ignore[union-attr]  # the else branch's node
    assert message.type == "message"
    assert response.output_text == call.output  # type: ignore[union-attr]
    assert [e.agent_id for e in await _usage(client)] == [general]


async def test_workflows_are_checked_whole_and_versioned(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    workflow, writer, general = await _define(client, tenant)
    headers = tenant.headers("developer")
    broken = _refund_desk(writer, general)
    broken["nodes"][5]["next"] = "route"  # general goes back to route: a cycle no while bounds
    refused = await client.post("/v1/workflows", json=broken, headers=headers)
    assert refused.status_code == 400, refused.text
    assert "route" in refused.json()["error"]["message"]
    assert "while" in refused.json()["error"]["message"]
    missing = await client.post("/v1/workflows", json=_refund_desk("agent_nobody", general), headers=headers)
    assert missing.status_code == 404
    assert (missing.json()["error"]["code"], missing.json()["error"]["param"]) == (
        "agent_not_found",
        "nodes.draft.agent_id",
    )
    changed = await client.patch(f"/v1/workflows/{workflow['id']}", json={"name": "refunds"}, headers=headers)
    assert (changed.json()["name"], changed.json()["version"]) == ("refunds", 2)
    versions = await client.get(f"/v1/workflows/{workflow['id']}/versions", headers=headers)
    assert sorted(v["version"] for v in versions.json()["data"]) == [1, 2]
    listed = await client.get("/v1/workflows", headers=headers)
    assert [w["id"] for w in listed.json()["data"]] == [workflow["id"]]
    agents = await client.get("/v1/agents", headers=headers)
    assert workflow["id"] not in [a["id"] for a in agents.json()["data"]]  # agents and workflows are listed apart
    assert (await client.get(f"/v1/agents/{workflow['id']}", headers=headers)).status_code == 404
    gone = await client.delete(f"/v1/workflows/{workflow['id']}", headers=headers)
    assert gone.json() == {"object": "workflow.deleted", "id": workflow["id"], "deleted": True}
    assert (await client.get(f"/v1/workflows/{workflow['id']}", headers=headers)).status_code == 404


async def test_a_workflow_asks_for_approval_through_the_responses_api(client: Any, make_tenant: Any) -> None:
    """The refund branch drafts twice (the while loop), then asks for approval as an ``mcp_approval_request``; the
    next response approves it (``previous_response_id``, an ``mcp_approval_response``) and answers the draft."""
    tenant = await make_tenant()
    workflow, writer, _ = await _define(client, tenant)
    sdk = openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys["developer"], http_client=client, max_retries=0
    )
    asking = await sdk.responses.create(model="any", prompt={"id": workflow["id"]}, input="A refund, please")
    *drafts, request = asking.output
    assert [(d.type, d.name) for d in drafts] == [("mcp_call", "draft"), ("mcp_call", "draft")]  # type: ignore[union-attr]
    assert (request.type, request.name) == ("mcp_approval_request", "approve_review")  # type: ignore[union-attr]
    assert drafts[-1].output in request.arguments  # type: ignore[union-attr]  # the message shows the last draft
    approved = await sdk.responses.create(
        model="any",
        prompt={"id": workflow["id"]},
        previous_response_id=asking.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
    )
    assert approved.status == "completed"
    assert approved.output_text == drafts[-1].output  # type: ignore[union-attr]
    assert [e.agent_id for e in await _usage(client)] == [writer, writer]  # the approval itself cost nothing
