"""A workflow's guardrail, function and MCP nodes, driven by the run loop: a guardrail node routes on its checks, a
function node asks the client (or runs a built-in tool on the worker), an MCP node calls its server's tool (after a
person approves, when the server asks for it); an at-most-once call interrupted by a crash is not repeated."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from switchyard.agents import (
    INTERRUPTED_OUTPUT,
    AgentSpec,
    AwaitClient,
    ExecuteTools,
    FunctionModel,
    Message,
    RunLoop,
    RunStatus,
    StepType,
    ToolRegistry,
    drive_run,
)
from switchyard.agents.team import Member
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult
from switchyard.agents.tools.calculator import CalculatorTool
from switchyard.agents.tools.function import FunctionTool

LOOKUP = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


class RefundServer:
    """An MCP server's ``refund`` tool as the registry offers it (``payments__refund``), counting its calls."""

    kind = ToolKind.MCP

    def __init__(self, *, requires_approval: bool = False) -> None:
        self.definition = ToolDefinition(name="payments__refund", description="refund an order", parameters=LOOKUP)
        self.requires_approval = requires_approval
        self.calls: list[dict[str, Any]] = []

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.AT_MOST_ONCE

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult(json.dumps({"refunded": arguments["order"], "amount": 12}))


def _workflow() -> dict[str, Any]:
    """Screen the message, look the order up (the client), add a fee (the calculator), refund it (MCP), answer."""
    return {
        "name": "refunds",
        "start": "screen",
        "state": {"order": {"type": "object"}, "why": {"type": "string"}, "total": {"type": "object"}},
        "nodes": [
            {"type": "guardrail", "id": "screen", "guardrails": [{"type": "regex", "pattern": "(?i)password",
             "name": "secrets"}], "passed": "lookup", "tripped": "refuse", "reason_to": "why"},
            {"type": "function", "id": "lookup", "tool": "lookup_order", "arguments": {"order": "{{ input }}"},
             "output_to": "order", "next": "fee"},
            {"type": "function", "id": "fee", "tool": "calculator",
             "arguments": {"expression": "{{ state.order.amount }} + 2"}, "output_to": "total", "next": "refund"},
            {"type": "mcp", "id": "refund", "server_label": "payments", "tool": "refund",
             "arguments": {"order": "{{ state.order.id }}"}, "next": "done"},
            {"type": "agent", "id": "refuse", "agent_id": "agent_polite", "input": "Refuse: {{ state.why }}",
             "next": "done"},
            {"type": "end", "id": "done", "output": "{{ last_output }} (total {{ state.total.result }})"},
        ],
    }  # fmt: skip


def _spec(*, approve: bool = False) -> AgentSpec:
    tools = [
        {"type": "function", "name": "lookup_order", "parameters": LOOKUP},
        {"type": "calculator"},
        {"type": "mcp", "server_label": "payments", "server_url": "http://127.0.0.1:1/mcp",
         "requires_approval": approve},
    ]  # fmt: skip
    return AgentSpec.model_validate({"name": "refunds", "model": "m", "tools": tools, "workflow": _workflow()})


def _loop(server: RefundServer) -> RunLoop:
    spec = _spec(approve=server.requires_approval)
    tools = ToolRegistry([FunctionTool("lookup_order", LOOKUP), CalculatorTool(), server])
    polite = AgentSpec(name="polite", model="m-polite")
    members = {"agent_polite": Member("agent_polite", 1, polite, ToolRegistry(), 8192)}
    return RunLoop(spec, tools, context_window_tokens=8192, members=members)


MODEL = FunctionModel(lambda request: "I cannot help with that.", chip_us_per_token=1)


async def test_tool_nodes_ask_the_client_run_built_ins_and_call_the_mcp_server() -> None:
    server = RefundServer()
    loop = _loop(server)
    thread = [Message.user("A-17")]
    state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=thread, model=MODEL)
    assert isinstance(action, AwaitClient)
    (call,) = action.required_action.tool_calls
    assert action.required_action.type == "submit_tool_outputs"
    assert (call.name, json.loads(call.arguments)) == ("lookup_order", {"order": "A-17"})
    answered = loop.submit_tool_outputs(state, {call.id: '{"id": "A-17", "amount": 40}'}, now_ms=1)
    final, _ = await drive_run(loop, answered, thread=thread, model=MODEL)
    assert final.status is RunStatus.COMPLETED
    assert server.calls == [{"order": "A-17"}]
    assert final.final_message is not None
    assert final.final_message.content == '{"refunded": "A-17", "amount": 12} (total 42)'
    calls = [(s.tool_call.name, s.output) for s in final.steps if s.tool_call is not None]
    assert calls == [
        ("lookup_order", '{"id": "A-17", "amount": 40}'),
        ("calculator", '{"result": 42}'),
        ("payments__refund", '{"refunded": "A-17", "amount": 12}'),
    ]
    assert not any(s.type is StepType.MODEL_CALL for s in final.steps)  # no agent node ran: nothing billed
    assert final.workflow is not None
    assert [(t.node, t.outcome) for t in final.workflow.trail][:2] == [
        ("screen", "passed"),
        ("lookup", "tool answered"),
    ]


async def test_a_tripped_guardrail_node_takes_its_tripped_edge_with_the_reason() -> None:
    server = RefundServer()
    loop = _loop(server)
    thread = [Message.user("my password is hunter2")]
    final, _ = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=thread, model=MODEL)
    assert final.status is RunStatus.COMPLETED
    assert final.final_message is not None
    assert final.final_message.content == "I cannot help with that. (total )"
    assert final.workflow is not None
    assert final.workflow.vars["why"] == ("workflow guardrail 'secrets' (regex) tripped: the text matches the pattern")
    assert final.workflow.trail[0].outcome == "tripped secrets"
    assert server.calls == []


async def test_an_mcp_node_waits_for_approval_and_a_denial_fails_the_workflow() -> None:
    for approved in (True, False):
        server = RefundServer(requires_approval=True)
        loop = _loop(server)
        thread = [Message.user("A-17")]
        state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=thread, model=MODEL)
        assert isinstance(action, AwaitClient)
        (lookup,) = action.required_action.tool_calls
        state = loop.submit_tool_outputs(state, {lookup.id: '{"id": "A-17", "amount": 1}'}, now_ms=1)
        state, action = await drive_run(loop, state, thread=thread, model=MODEL)
        assert isinstance(action, AwaitClient)
        assert action.required_action.type == "approval"
        (ask,) = action.required_action.tool_calls
        assert ask.name == "payments__refund"
        assert server.calls == []
        decided = loop.submit_approvals(state, {ask.id: approved}, now_ms=2)
        final, _ = await drive_run(loop, decided, thread=thread, model=MODEL)
        if approved:
            assert final.status is RunStatus.COMPLETED
            assert server.calls == [{"order": "A-17"}]
        else:
            assert final.status is RunStatus.FAILED
            assert final.last_error is not None
            assert final.last_error.code == "tool_error"
            assert "not approved" in final.last_error.message
            assert server.calls == []


async def test_an_at_most_once_call_interrupted_by_a_crash_is_not_repeated() -> None:
    server = RefundServer()
    loop = _loop(server)
    thread = [Message.user("A-17")]
    state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=thread, model=MODEL)
    assert isinstance(action, AwaitClient)
    (lookup,) = action.required_action.tool_calls
    state = loop.submit_tool_outputs(state, {lookup.id: '{"id": "A-17", "amount": 1}'}, now_ms=1)
    while True:  # up to the refund's call, recorded but not made: where a killed worker left it
        state, action = loop.advance(state, thread=thread, now_ms=2)
        assert isinstance(action, ExecuteTools)
        (invocation,) = action.invocations
        if invocation.tool_call.name == "payments__refund":
            break
        result = await CalculatorTool().call(dict(invocation.arguments), ToolContext(run_id="run_1", call_id="c"))
        state = loop.record_tool_result(state, invocation.step_id, result, now_ms=2)
    final, _ = await drive_run(loop, state, thread=thread, model=MODEL)
    assert server.calls == []
    assert final.status is RunStatus.FAILED
    assert final.last_error is not None
    assert final.last_error.code == "tool_error"
    assert INTERRUPTED_OUTPUT in final.last_error.message


async def test_arguments_that_do_not_fit_the_tool_fail_the_workflow_naming_the_node() -> None:
    loop = _loop(RefundServer())
    thread = [Message.user("A-17")]
    state, action = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=thread, model=MODEL)
    assert isinstance(action, AwaitClient)
    (lookup,) = action.required_action.tool_calls
    state = loop.submit_tool_outputs(state, {lookup.id: '{"amount": 1}'}, now_ms=1)  # no id to refund
    final, _ = await drive_run(loop, state, thread=thread, model=MODEL)
    assert final.status is RunStatus.FAILED
    assert final.last_error is not None
    assert final.last_error.code == "tool_error"
    assert final.last_error.message.startswith("node 'refund': the arguments do not fit the tool")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tool": "lookup"}, "node 'lookup': tool 'lookup' is not one of the workflow's tools"),
        ({"tool": "payments"}, "node 'lookup': tool 'payments' is not one of the workflow's tools"),
    ],
)
def test_a_function_node_names_one_of_the_workflows_tools(change: dict[str, str], message: str) -> None:
    spec = _spec().model_dump(mode="json", by_alias=True)
    spec["workflow"]["nodes"][1].update(change)
    with pytest.raises(ValidationError, match=message):
        AgentSpec.model_validate(spec)


def test_an_mcp_node_names_a_server_of_the_workflow_and_a_tool_it_allows() -> None:
    spec = _spec().model_dump(mode="json", by_alias=True)
    spec["workflow"]["nodes"][3]["server_label"] = "billing"
    with pytest.raises(ValidationError, match="server_label 'billing' is no MCP tool of the workflow"):
        AgentSpec.model_validate(spec)
    spec = _spec().model_dump(mode="json", by_alias=True)
    spec["tools"][2]["allowed_tools"] = ["lookup"]
    with pytest.raises(ValidationError, match="tool 'refund' is not in the allowed_tools of 'payments'"):
        AgentSpec.model_validate(spec)


def test_a_guardrail_node_checks_without_a_judge_and_writes_its_reason_to_a_string() -> None:
    spec = _spec().model_dump(mode="json", by_alias=True)
    spec["workflow"]["nodes"][0]["guardrails"] = [{"type": "agent", "agent_id": "agent_judge"}]
    with pytest.raises(ValidationError, match="for an agent judging, use an agent node"):
        AgentSpec.model_validate(spec)
    spec = _spec().model_dump(mode="json", by_alias=True)
    spec["workflow"]["nodes"][0]["reason_to"] = "order"
    with pytest.raises(ValidationError, match="reason_to names 'order', which is not a string variable"):
        AgentSpec.model_validate(spec)


def test_the_guardrail_nodes_schemas_are_bounded_together() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    spec = _spec().model_dump(mode="json", by_alias=True)
    checks = [{"type": "json_schema", "schema": schema} for _ in range(16)]
    spec["workflow"]["nodes"][0]["guardrails"] = checks
    with pytest.raises(ValidationError, match="the guardrail nodes' schemas have more than 5,000 nodes together"):
        AgentSpec.model_validate(spec)


async def test_a_file_search_node_searches_the_workflows_stores_with_the_rendered_query() -> None:
    from switchyard.agents.tools import FileSearchHit, FileSearchTool

    asked: list[str] = []

    async def search(stores: Any, query: str, **options: Any) -> list[FileSearchHit]:
        asked.append(query)
        return [FileSearchHit(file_id="file-1", filename="policy.md", score=0.8, text="Refunds take 5 days.")]

    workflow = {
        "name": "answer",
        "start": "find",
        "state": {"found": {"type": "object"}},
        "nodes": [
            {"type": "file_search", "id": "find", "query": "refund {{ input }}", "output_to": "found", "next": "done"},
            {"type": "end", "id": "done",
             "output": "{{ state.found.results[0].text }} ({{ state.found.results[0].filename }})"},
        ],
    }  # fmt: skip
    tool = {"type": "file_search", "vector_store_ids": ["vs_1"]}
    spec = AgentSpec.model_validate({"name": "answer", "model": "m", "tools": [tool], "workflow": workflow})
    loop = RunLoop(spec, ToolRegistry([FileSearchTool(search, vector_store_ids=["vs_1"])]), context_window_tokens=8192)
    final, _ = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("delays")], model=MODEL)
    assert final.status is RunStatus.COMPLETED
    assert asked == ["refund delays"]
    assert final.final_message is not None
    assert final.final_message.content == "Refunds take 5 days. (policy.md)"
    with pytest.raises(ValidationError, match="node 'find': the workflow has no file_search tool"):
        AgentSpec.model_validate({"name": "answer", "model": "m", "workflow": workflow})
