"""A run that acts as several agents, traced: each agent acting is a span ``invoke_agent {name}`` holding its model
calls, and a workflow's nodes are spans ``workflow_node {id}`` around their agents, all under the run's span,
received by a real OTLP/HTTP receiver from runs on the app's simulated accelerator pool."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from switchyard.platform.observability.tracing import flush_tracing
from tests.platform.agents_api.factories import MODEL, make_agent, run_inline, wait_for_run

if TYPE_CHECKING:
    from tests.platform.observability.conftest import OtlpReceiver, ReceivedSpan

CHAT = f"chat {MODEL}"


@pytest.fixture
def settings(settings: Any, otlp_receiver: Any) -> Any:
    return settings.model_copy(update={"otlp_endpoint": otlp_receiver.endpoint})


async def _run(client: Any, tenant: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Create a run on a new thread and wait until it completed."""
    headers = tenant.headers("developer")
    created = await client.post("/v1/runs", json=body, headers=headers)
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses={"completed"})
    return dict(run)


async def _run_span(receiver: OtlpReceiver, run_id: str) -> ReceivedSpan:
    """The run's own span, once exported (it ends a moment after the run is seen completed)."""
    for _ in range(500):
        assert flush_tracing()
        runs = [s for s in receiver.named("invoke_agent") if s.attributes.get("switchyard.run_id") == run_id]
        if runs:
            (run,) = runs
            return run
        await asyncio.sleep(0.01)
    raise AssertionError(f"no span for run {run_id}")


def _model_call(receiver: OtlpReceiver, agent: ReceivedSpan) -> ReceivedSpan:
    """The one model call an agent's span holds, with its compute."""
    (call,) = receiver.children(agent)
    assert call.name == CHAT
    assert call.attributes["switchyard.chip_us"] > 0
    assert call.attributes["switchyard.replica"]
    assert call.attributes["switchyard.ttft_ms"] > 0
    assert agent.attributes["switchyard.chip_us"] == call.attributes["switchyard.chip_us"]
    assert agent.attributes["gen_ai.usage.output_tokens"] == call.attributes["gen_ai.usage.output_tokens"]
    return call


def _is_agent(span: ReceivedSpan, name: str, agent_id: str) -> None:
    assert span.name == f"invoke_agent {name}"
    assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert span.attributes["gen_ai.agent.name"] == name
    assert span.attributes["gen_ai.agent.id"] == agent_id
    assert span.attributes["gen_ai.request.model"] == MODEL


async def test_a_workflow_run_is_a_span_per_node_with_its_agent_and_model_calls_inside(
    client: Any, make_tenant: Any, otlp_receiver: OtlpReceiver
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    writer = (await make_agent(client, tenant, name="writer", instructions="You draft."))["id"]
    reviewer = (await make_agent(client, tenant, name="reviewer", instructions="You review."))["id"]
    graph = {
        "name": "draft-and-review",
        "start": "route",
        "nodes": [
            {"type": "if_else", "id": "route", "condition": "len(input) > 0", "then": "draft", "else": "done"},
            {"type": "agent", "id": "draft", "agent_id": writer, "next": "review"},
            {"type": "agent", "id": "review", "agent_id": reviewer, "next": "done"},
            {"type": "end", "id": "done"},
        ],
    }
    created = await client.post("/v1/workflows", json=graph, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    run = await _run(client, tenant, {"workflow_id": workflow_id, "thread": {"messages": [{"content": "a reply"}]}})

    span = await _run_span(otlp_receiver, run["id"])
    nodes = otlp_receiver.children(span)
    assert [n.name for n in nodes] == [
        "workflow_node route",
        "workflow_node draft",
        "workflow_node review",
        "workflow_node done",
    ]
    assert [
        (n.attributes["switchyard.workflow.node_id"], n.attributes["switchyard.workflow.node_type"]) for n in nodes
    ] == [("route", "if_else"), ("draft", "agent"), ("review", "agent"), ("done", "end")]
    assert [n.attributes["switchyard.workflow.outcome"] for n in nodes] == [
        "then",
        "agent answered",
        "agent answered",
        "completed",
    ]  # from the workflow's trail
    assert {n.attributes["switchyard.workflow.id"] for n in nodes} == {workflow_id}
    assert {n.attributes["switchyard.workflow.name"] for n in nodes} == {"draft-and-review"}
    route, draft, review, done = nodes
    assert (route.start_ns, done.start_ns) == (route.end_ns, done.end_ns)  # nodes that run no agent take no time
    assert draft.end_ns <= review.start_ns

    (drafting,) = otlp_receiver.children(draft)
    (reviewing,) = otlp_receiver.children(review)
    _is_agent(drafting, "writer", writer)
    _is_agent(reviewing, "reviewer", reviewer)
    calls = [_model_call(otlp_receiver, drafting), _model_call(otlp_receiver, reviewing)]
    assert sum(c.attributes["switchyard.chip_us"] for c in calls) == run["chip_us"]
    assert len(otlp_receiver.named(CHAT)) == 2  # no model call outside its agent


async def test_a_run_that_hands_off_is_a_span_per_agent_in_turn(
    client: Any, make_tenant: Any, otlp_receiver: OtlpReceiver
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    refunds = (await make_agent(client, tenant, name="refunds", instructions="You handle refunds."))["id"]
    triage = (await make_agent(client, tenant, name="triage", handoffs=[{"agent_id": refunds}]))["id"]
    body = {"agent_id": triage, "thread": {"messages": [{"content": "I want my money back: transfer_to_refunds"}]}}
    run = await _run(client, tenant, body)

    span = await _run_span(otlp_receiver, run["id"])
    first, second = otlp_receiver.children(span)
    _is_agent(first, "triage", triage)
    _is_agent(second, "refunds", refunds)
    assert second.attributes["switchyard.agent_version"] == 1
    assert first.end_ns <= second.start_ns  # the triage agent stopped acting when it handed off
    calls = [_model_call(otlp_receiver, first), _model_call(otlp_receiver, second)]
    assert sum(c.attributes["switchyard.chip_us"] for c in calls) == run["chip_us"]


async def test_an_agent_called_as_a_tool_is_a_span_inside_its_caller(
    client: Any, make_tenant: Any, otlp_receiver: OtlpReceiver
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    helper = (await make_agent(client, tenant, name="researcher", instructions="You find facts."))["id"]
    tools = [{"type": "agent", "agent_id": helper, "name": "researcher"}, {"type": "calculator"}]
    lead = (await make_agent(client, tenant, name="lead", tools=tools))["id"]
    body = {"agent_id": lead, "thread": {"messages": [{"content": "ask the researcher"}]}}
    run = await _run(client, tenant, body)

    span = await _run_span(otlp_receiver, run["id"])
    (leading,) = otlp_receiver.children(span)
    _is_agent(leading, "lead", lead)
    asks, called, answers = otlp_receiver.children(leading)  # the lead's call, the agent it called, its answer
    assert (asks.name, answers.name) == (CHAT, CHAT)
    _is_agent(called, "researcher", helper)
    _model_call(otlp_receiver, called)
    assert (
        leading.attributes["switchyard.chip_us"]
        == asks.attributes["switchyard.chip_us"] + answers.attributes["switchyard.chip_us"]
    )


async def test_a_workflow_waiting_for_approval_goes_on_in_the_spans_of_the_next_drive(
    client: Any, make_tenant: Any, otlp_receiver: OtlpReceiver
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    writer = (await make_agent(client, tenant, name="writer", instructions="You draft."))["id"]
    graph = {
        "name": "draft-and-approve",
        "start": "draft",
        "nodes": [
            {"type": "agent", "id": "draft", "agent_id": writer, "next": "review"},
            {"type": "user_approval", "id": "review", "message": "Send it?", "approved": "done", "rejected": "done"},
            {"type": "end", "id": "done"},
        ],
    }
    created = await client.post("/v1/workflows", json=graph, headers=headers)
    assert created.status_code == 201, created.text
    body = {"workflow_id": created.json()["id"], "thread": {"messages": [{"content": "a reply"}]}}
    started = await client.post("/v1/runs", json=body, headers=headers)
    assert started.status_code == 201, started.text
    thread_id, run_id = started.json()["thread_id"], started.json()["id"]
    waiting = await wait_for_run(client, thread_id, run_id, headers, statuses={"requires_action"})
    first = await _run_span(otlp_receiver, run_id)
    drafted, asked = otlp_receiver.children(first)
    assert (drafted.name, asked.name) == ("workflow_node draft", "workflow_node review")
    assert asked.attributes["switchyard.workflow.node_type"] == "user_approval"
    assert asked.attributes["switchyard.workflow.outcome"] == "awaiting_approval"

    (approval,) = waiting["required_action"]["approval"]["tool_calls"]
    decided = await client.post(
        f"/v1/threads/{thread_id}/runs/{run_id}/approvals",
        json={"approvals": [{"tool_call_id": approval["id"], "approve": True}]},
        headers=headers,
    )
    assert decided.status_code == 200, decided.text
    await wait_for_run(client, thread_id, run_id, headers, statuses={"completed"})
    otlp_receiver.spans.remove(first)
    second = await _run_span(otlp_receiver, run_id)  # the drive that went on: a span of its own
    approved, done = otlp_receiver.children(second)
    assert [(s.name, s.attributes["switchyard.workflow.outcome"]) for s in (approved, done)] == [
        ("workflow_node review", "approved"),
        ("workflow_node done", "completed"),
    ]


async def test_an_agent_judging_a_guardrail_is_a_span_inside_the_agent_it_guards(
    client: Any, make_tenant: Any, otlp_receiver: OtlpReceiver
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    judge = (await make_agent(client, tenant, name="judge", instructions="Judge politeness."))["id"]
    guardrails = {"input": [{"type": "agent", "agent_id": judge}], "output": [{"type": "agent", "agent_id": judge}]}
    guarded = (await make_agent(client, tenant, name="guarded", guardrails=guardrails))["id"]
    run = await _run(client, tenant, {"agent_id": guarded, "thread": {"messages": [{"content": "hello"}]}})

    span = await _run_span(otlp_receiver, run["id"])
    (acting,) = otlp_receiver.children(span)
    _is_agent(acting, "guarded", guarded)
    judging_input, answering, judging_output = otlp_receiver.children(acting)
    assert answering.name == CHAT
    for judging, guarding in ((judging_input, "input"), (judging_output, "output")):
        _is_agent(judging, "judge", judge)
        assert judging.attributes["switchyard.guardrail"] == guarding
        _model_call(otlp_receiver, judging)
