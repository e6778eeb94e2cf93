"""Spans of requests, model calls, agent runs and tool calls, received by a real OTLP/HTTP receiver."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from switchyard.platform.observability.tracing import flush_tracing
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}
SERVER, CLIENT = 2, 3  # OTLP's span kinds


@pytest.fixture
def settings(settings: Any, otlp_receiver: Any) -> Any:
    return settings.model_copy(update={"otlp_endpoint": otlp_receiver.endpoint})


async def test_a_chat_completion_is_a_server_span_with_a_genai_model_call_span(
    client: Any, make_tenant: Any, otlp_receiver: Any
) -> None:
    tenant = await make_tenant()
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    answer = await client.post(
        "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8},
        headers={**tenant.headers("developer"), "traceparent": f"00-{trace_id}-{parent_id}-01"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-trace-id"] == trace_id  # the caller's trace continues here
    usage = answer.json()["usage"]
    assert flush_tracing()

    assert otlp_receiver.paths
    assert set(otlp_receiver.paths) == {"/v1/traces"}
    (server,) = [s for s in otlp_receiver.named("POST /v1/chat/completions") if s.trace_id == trace_id]
    assert server.kind == SERVER
    assert server.parent_span_id == parent_id
    assert server.service == "switchyard-api"
    assert server.attributes["http.route"] == "/v1/chat/completions"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["switchyard.tenant_id"] == tenant.id
    assert server.attributes["switchyard.request_id"] == answer.headers["x-request-id"]

    (call,) = [s for s in otlp_receiver.named(f"chat {MODEL}") if s.trace_id == trace_id]
    assert call.kind == CLIENT
    assert call.parent_span_id == server.span_id
    attributes = call.attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["gen_ai.request.max_tokens"] == 8
    assert attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert attributes["switchyard.chip_us"] == usage["compute"]["chip_us"] > 0
    assert attributes["switchyard.replica"] == usage["compute"]["replica"]
    assert attributes["switchyard.instance_type"] == usage["compute"]["instance_type"]


async def test_an_agent_run_is_a_span_with_its_agent_and_its_model_and_tool_calls_inside(
    client: Any, make_tenant: Any, otlp_receiver: Any
) -> None:
    tenant = await make_tenant()
    run_inline(client)
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    created = await client.post(
        "/v1/runs",
        json={"agent_id": agent["id"], "thread": {"messages": [{"content": "use the calculator please"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run
    trace_id = created.headers["x-trace-id"]

    for _ in range(500):  # the run's span ends a moment after the run is seen completed
        assert flush_tracing()
        runs = [s for s in otlp_receiver.named("invoke_agent") if s.attributes.get("switchyard.run_id") == run["id"]]
        if runs:
            break
        await asyncio.sleep(0.01)
    (agent_run,) = runs
    assert agent_run.trace_id == trace_id  # started by the request that created the run
    assert agent_run.attributes["switchyard.run_outcome"] == "completed"
    assert agent_run.attributes["switchyard.tenant_id"] == tenant.id
    (acting,) = otlp_receiver.children(agent_run)  # the agent it ran as, its calls inside
    assert acting.name == "invoke_agent helper"
    assert acting.attributes["gen_ai.agent.id"] == agent["id"]
    inside = otlp_receiver.children(acting)
    assert [s.name for s in inside] == [f"chat {MODEL}", "execute_tool calculator", f"chat {MODEL}"]
    (tool,) = [s for s in inside if s.name == "execute_tool calculator"]
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.type"] == "builtin"
    assert tool.attributes["switchyard.run_id"] == run["id"]
    assert sum(s.attributes["switchyard.chip_us"] for s in inside if s.name.startswith("chat ")) == run["chip_us"]
