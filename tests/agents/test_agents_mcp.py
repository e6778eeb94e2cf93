"""MCP tools against a real MCP server (streamable HTTP) started on 127.0.0.1, through the SSRF guard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from switchyard.agents import (
    AgentSpec,
    AwaitClient,
    FunctionModel,
    Message,
    ModelRequest,
    RetrySemantics,
    RunLoop,
    RunStatus,
    SSRFBlockedError,
    StaticResolver,
    ToolCall,
    ToolExecutionError,
    ToolKind,
    build_tools,
    drive_run,
)
from switchyard.agents.tools import McpServerConnection, SSRFGuard, ToolContext
from tests.support.mcp import mcp_http_app
from tests.support.served import port_of, served

CALLS: list[str] = []


def _make_server() -> MCPServer:
    server = MCPServer("switchyard-test")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        CALLS.append(f"add {a} {b}")
        return a + b

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    @server.tool(name="text.upper")
    def upper(text: str) -> str:
        """A dotted tool name."""
        return text.upper()

    @server.tool()
    def explode() -> str:
        """Always fails."""
        raise ToolError("boom")

    return server


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    app = mcp_http_app(_make_server())
    with served(app) as url:
        yield port_of(url)


RESOLVER = {"mcp.test": ["127.0.0.1"], "app.test": ["127.0.0.1"]}


def _connection(port: int, **kwargs: Any) -> McpServerConnection:
    guard = SSRFGuard(resolver=StaticResolver(RESOLVER), allow_loopback=True)
    return McpServerConnection(label="calc", url=f"http://mcp.test:{port}/mcp", guard=guard, **kwargs)


async def test_lists_and_calls_tools(mcp_port: int) -> None:
    tools = {t.definition.name: t for t in await _connection(mcp_port).list_tools()}
    assert set(tools) == {"calc__add", "calc__lookup", "calc__explode", "calc__text_upper"}
    assert (await tools["calc__text_upper"].call({"text": "abc"}, ToolContext())).output == "ABC"
    add = tools["calc__add"]
    assert add.kind is ToolKind.MCP
    assert add.definition.parameters["required"] == ["a", "b"]
    assert add.retry_semantics({}) is RetrySemantics.AT_MOST_ONCE
    assert tools["calc__lookup"].retry_semantics({}) is RetrySemantics.IDEMPOTENT
    result = await add.call({"a": 2, "b": 40}, ToolContext())
    assert (result.output, result.is_error) == ("42", False)
    failed = await tools["calc__explode"].call({}, ToolContext())
    assert failed.is_error
    assert "boom" in failed.output


async def test_allowed_tools_filter(mcp_port: int) -> None:
    tools = await _connection(mcp_port, allowed_tools=["lookup"]).list_tools()
    assert [t.definition.name for t in tools] == ["calc__lookup"]


async def test_mcp_server_on_loopback_is_refused_without_the_test_allowance(mcp_port: int) -> None:
    guard = SSRFGuard(resolver=StaticResolver(RESOLVER))
    connection = McpServerConnection(label="calc", url=f"http://mcp.test:{mcp_port}/mcp", guard=guard)
    with pytest.raises(SSRFBlockedError, match="loopback"):
        await connection.list_tools()
    with pytest.raises(SSRFBlockedError):
        McpServerConnection(label="x", url="http://169.254.169.254/mcp", guard=guard)


async def test_unreachable_mcp_server_is_a_tool_error() -> None:
    guard = SSRFGuard(resolver=StaticResolver(RESOLVER), allow_loopback=True)
    connection = McpServerConnection(label="x", url="http://mcp.test:9/mcp", guard=guard, timeout_s=2)
    with pytest.raises(ToolExecutionError, match="could not be listed"):
        await connection.list_tools()


async def test_agent_with_mcp_http_and_function_tools_runs_end_to_end(mcp_port: int, http_server) -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "e2e",
            "model": "llama-3.1-8b",
            "instructions": "Use the tools.",
            "tools": [
                {"type": "mcp", "server_label": "calc", "server_url": f"http://mcp.test:{mcp_port}/mcp"},
                {"type": "http_request", "allowed_hosts": ["app.test"]},
                {"type": "function", "name": "confirm", "parameters": {"type": "object", "properties": {}}},
            ],
        }
    )
    registry = await build_tools(spec, resolver=StaticResolver(RESOLVER), allow_loopback=True)
    loop = RunLoop(spec, registry, context_window_tokens=8192)

    def answer(request: ModelRequest) -> Message:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        if turns == 0:
            return Message.assistant(
                None,
                [
                    ToolCall(id="m1", name="calc__add", arguments=json.dumps({"a": 20, "b": 22})),
                    ToolCall(
                        id="h1",
                        name="http_request",
                        arguments=json.dumps({"url": f"http://app.test:{http_server.port}/ok"}),
                    ),
                    ToolCall(id="f1", name="confirm", arguments="{}"),
                ],
            )
        results = {m.tool_call_id: m.content for m in request.messages if m.role == "tool"}
        return Message.assistant(
            f"sum={results['m1']} http={json.loads(results['h1'] or '{}')['body']} ok={results['f1']}"
        )

    model = FunctionModel(answer, chip_us_per_token=3)
    CALLS.clear()
    thread = [Message.user("go")]
    state, action = await drive_run(loop, loop.new_run("run_e2e", now_ms=0), thread=thread, model=model)
    assert isinstance(action, AwaitClient)
    assert [c.id for c in action.required_action.tool_calls] == ["f1"]
    state = loop.submit_tool_outputs(state, {"f1": "yes"}, now_ms=state.started_at_ms or 0)
    state, _ = await drive_run(loop, state, thread=thread, model=model)
    assert state.status is RunStatus.COMPLETED
    assert state.final_message is not None
    assert state.final_message.content == "sum=42 http=hello ok=yes"
    assert CALLS == ["add 20 22"]
    model_steps = [s for s in state.steps if s.chip_us]
    assert len(model_steps) == 2
    assert state.chip_us == sum(s.chip_us for s in model_steps) > 0
