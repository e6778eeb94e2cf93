"""A hosted workflow's guardrail, function and MCP nodes: its own tools (a client's function, a real MCP server on
127.0.0.1), run through /v1/runs and through /v1/responses with the official ``openai`` client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from switchyard.agents import StaticResolver
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run
from tests.support.mcp import mcp_http_app
from tests.support.served import port_of, served

REFUNDS: list[str] = []
LOOKUP = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


@pytest.fixture(scope="module")
def payments_port() -> Iterator[int]:
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("payments")

    @mcp.tool()
    def refund(order: str) -> str:
        """Refund an order."""
        REFUNDS.append(order)
        return f"refunded {order}"

    with served(mcp_http_app(mcp)) as url:
        yield port_of(url)


def _refunds(writer: str, port: int) -> dict[str, Any]:
    """Screen the request, look the order up (the client's function), refund it (MCP), have the writer confirm."""
    return {
        "name": "refunds",
        "start": "screen",
        "state": {"order": {"type": "object"}, "why": {"type": "string"}},
        "tools": [
            {"type": "function", "name": "lookup_order", "parameters": LOOKUP},
            {"type": "mcp", "server_label": "payments", "server_url": f"http://mcp.test:{port}/mcp",
             "headers": {"Authorization": "Bearer s3cret"}},
        ],
        "nodes": [
            {"type": "guardrail", "id": "screen", "guardrails": [{"type": "max_length", "max_chars": 40}],
             "passed": "lookup", "tripped": "too_long", "reason_to": "why"},
            {"type": "function", "id": "lookup", "tool": "lookup_order", "arguments": {"order": "{{ input }}"},
             "output_to": "order", "next": "refund"},
            {"type": "mcp", "id": "refund", "server_label": "payments", "tool": "refund",
             "arguments": {"order": "{{ state.order.id }}"}, "next": "confirm"},
            {"type": "agent", "id": "confirm", "agent_id": writer, "input": "Confirm: {{ last_output }}",
             "next": "done"},
            {"type": "end", "id": "too_long", "output": "{{ state.why }}"},
            {"type": "end", "id": "done"},
        ],
    }  # fmt: skip


async def _define(client: Any, tenant: Any, port: int) -> tuple[dict[str, Any], str]:
    writer = (await make_agent(client, tenant, name="writer"))["id"]
    created = await client.post("/v1/workflows", json=_refunds(writer, port), headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    return created.json(), writer


async def test_a_workflow_calls_the_clients_function_then_its_mcp_server_through_runs(
    client: Any, make_tenant: Any, payments_port: int
) -> None:
    run_inline(client, resolver=StaticResolver({"mcp.test": ["127.0.0.1"]}), allow_loopback=True)
    tenant = await make_tenant()
    workflow, _ = await _define(client, tenant, payments_port)
    assert workflow["tools"][1]["headers"] == {"Authorization": "<redacted>"}  # write-only, as an agent's
    headers = tenant.headers("developer")
    REFUNDS.clear()
    created = await client.post(
        "/v1/runs", json={"workflow_id": workflow["id"], "thread": {"messages": [{"content": "A-17"}]}}, headers=headers
    )
    assert created.status_code == 201, created.text
    thread_id, run_id = created.json()["thread_id"], created.json()["id"]
    waiting = await wait_for_run(client, thread_id, run_id, headers, statuses={"requires_action"})
    (call,) = waiting["required_action"]["submit_tool_outputs"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("lookup_order", {"order": "A-17"})
    submitted = await client.post(
        f"/v1/threads/{thread_id}/runs/{run_id}/submit_tool_outputs",
        json={"tool_outputs": [{"tool_call_id": call["id"], "output": '{"id": "A-17", "total": 40}'}]},
        headers=headers,
    )
    assert submitted.status_code == 200, submitted.text
    done = await wait_for_run(client, thread_id, run_id, headers, statuses={"completed", "failed"})
    assert done["status"] == "completed", done
    assert REFUNDS == ["A-17"]
    steps = await client.get(f"/v1/threads/{thread_id}/runs/{run_id}/steps", headers=headers)
    calls = sorted((s for s in steps.json()["data"] if s["type"] == "tool_call"), key=lambda s: s["index"])
    assert [(c["step_details"]["tool_call"]["function"]["name"], c["step_details"]["output"]) for c in calls[:2]] == [
        ("lookup_order", '{"id": "A-17", "total": 40}'),
        ("payments__refund", "refunded A-17"),
    ]


async def test_a_tripped_guardrail_node_answers_without_calling_anything(
    client: Any, make_tenant: Any, payments_port: int
) -> None:
    client.app.state.tool_options = {"resolver": StaticResolver({"mcp.test": ["127.0.0.1"]}), "allow_loopback": True}
    tenant = await make_tenant()
    workflow, _ = await _define(client, tenant, payments_port)
    sdk = openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys["developer"], http_client=client, max_retries=0
    )
    response = await sdk.responses.create(model="any", prompt={"id": workflow["id"]}, input="x" * 41)
    assert response.status == "completed", response.error
    assert response.output_text == (
        "workflow guardrail 'max_length' (max_length) tripped: the text is 41 characters long; at most 40 are allowed"
    )


async def test_a_workflow_asks_for_its_function_through_the_responses_api(
    client: Any, make_tenant: Any, payments_port: int
) -> None:
    client.app.state.tool_options = {"resolver": StaticResolver({"mcp.test": ["127.0.0.1"]}), "allow_loopback": True}
    tenant = await make_tenant()
    workflow, _ = await _define(client, tenant, payments_port)
    sdk = openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys["developer"], http_client=client, max_retries=0
    )
    REFUNDS.clear()
    asking = await sdk.responses.create(model="any", prompt={"id": workflow["id"]}, input="B-2")
    listed, call = asking.output  # the MCP server's tools are listed when the run starts, as an agent's are
    assert listed.type == "mcp_list_tools"
    assert (call.type, call.name, json.loads(call.arguments)) == ("function_call", "lookup_order", {"order": "B-2"})  # type: ignore[union-attr]
    answered = await sdk.responses.create(
        model="any",
        prompt={"id": workflow["id"]},
        previous_response_id=asking.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"id": "B-2"}'}],  # type: ignore[union-attr]
    )
    assert answered.status == "completed", answered.error
    refund = next(item for item in answered.output if item.type == "mcp_call")
    assert (refund.server_label, refund.name, refund.output) == ("payments", "refund", "refunded B-2")  # type: ignore[union-attr]
    assert REFUNDS == ["B-2"]


async def test_tool_nodes_name_the_workflows_own_tools(client: Any, make_tenant: Any, payments_port: int) -> None:
    tenant = await make_tenant()
    workflow, writer = await _define(client, tenant, payments_port)
    headers = tenant.headers("developer")
    body = _refunds(writer, payments_port)
    body["nodes"][1]["tool"] = "find_order"
    refused = await client.post("/v1/workflows", json=body, headers=headers)
    assert refused.status_code == 400, refused.text
    assert "node 'lookup': tool 'find_order' is not one of the workflow's tools" in refused.json()["error"]["message"]
    dropped = await client.patch(f"/v1/workflows/{workflow['id']}", json={"tools": []}, headers=headers)
    assert dropped.status_code == 400
    assert "tool 'lookup_order' is not one of the workflow's tools" in dropped.json()["error"]["message"]
    kept = await client.patch(f"/v1/workflows/{workflow['id']}", json={"tools": workflow["tools"]}, headers=headers)
    assert (kept.status_code, kept.json()["version"]) == (200, 1)  # <redacted> sent back keeps the secret: no change
