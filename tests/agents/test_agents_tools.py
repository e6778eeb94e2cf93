"""Built-in tools (calculator, current_time, http_request), function tools and the registry."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from switchyard.agents import AgentSpec, RetrySemantics, ToolExecutionError, ToolKind, ToolRegistry, build_tools
from switchyard.agents.tools import (
    CalculatorTool,
    CurrentTimeTool,
    FunctionTool,
    HttpRequestTool,
    StaticResolver,
    Tool,
    ToolContext,
    evaluate_expression,
    validate_arguments,
)

CTX = ToolContext(run_id="r", call_id="c")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 10", 1024),
        ("-3 // 2", -2),
        ("7 % 4", 3),
        ("1 / 4", 0.25),
        ("sqrt(16) + abs(-2)", 6.0),
        ("max(1, 5, 3)", 5),
        ("round(pi, 2)", 3.14),
        ("2 ** -1", 0.5),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, expected: float) -> None:
    assert evaluate_expression(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('id')",
        "().__class__.__bases__[0].__subclasses__()",
        "open('/etc/passwd').read()",
        "(lambda: 1)()",
        "[x for x in range(10)]",
        "a + 1",
        "'abc' * 3",
        "True + 1",
        "9 ** 9 ** 9",
        "10 ** 100000",
        "2 ** 20000",
        "(10 ** 1000) * (10 ** 1000) * (10 ** 1000) * (10 ** 1000) * (10 ** 1000)",
        "1 / 0",
        "10.0 ** 400",
        "sqrt(-1)",
        "max()",
        "1 +" * 400 + "1",
        "x = 1",
        "sqrt(x=4)",
        "",
    ],
)
def test_calculator_refuses_everything_else(expression: str) -> None:
    with pytest.raises(ToolExecutionError):
        evaluate_expression(expression)


async def test_calculator_tool_contract() -> None:
    tool = CalculatorTool()
    assert isinstance(tool, Tool)
    assert tool.kind is ToolKind.BUILTIN
    assert tool.retry_semantics({}) is RetrySemantics.IDEMPOTENT
    assert (await tool.call({"expression": "6*7"}, CTX)).output == '{"result": 42}'


async def test_current_time_reads_the_injected_clock() -> None:
    fixed = datetime(2026, 12, 2, 15, 30, tzinfo=UTC)
    tool = CurrentTimeTool(clock=lambda: fixed)
    utc = json.loads((await tool.call({}, CTX)).output)
    assert utc["datetime"] == "2026-12-02T15:30:00+00:00"
    paris = json.loads((await tool.call({"timezone": "Europe/Paris"}, CTX)).output)
    assert paris["datetime"] == "2026-12-02T16:30:00+01:00"
    with pytest.raises(ToolExecutionError, match="unknown time zone"):
        await tool.call({"timezone": "Mars/Olympus"}, CTX)
    assert tool.retry_semantics({}) is RetrySemantics.IDEMPOTENT


def _http_tool(port: int, **kwargs: object) -> HttpRequestTool:
    return HttpRequestTool(
        allowed_hosts=["app.test"],
        resolver=StaticResolver({"app.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}),
        allow_loopback=True,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_http_request_get_and_post(http_server) -> None:
    tool = _http_tool(http_server.port, methods=["GET", "POST"])
    got = json.loads((await tool.call({"url": f"http://app.test:{http_server.port}/ok"}, CTX)).output)
    assert (got["status"], got["body"]) == (200, "hello")
    posted = await tool.call(
        {"method": "POST", "url": f"http://app.test:{http_server.port}/echo", "body": "payload"}, CTX
    )
    assert json.loads(posted.output)["body"] == f"POST app.test:{http_server.port} payload"
    assert tool.retry_semantics({"method": "GET"}) is RetrySemantics.IDEMPOTENT
    assert tool.retry_semantics({"method": "POST"}) is RetrySemantics.AT_MOST_ONCE


async def test_http_request_enforces_allow_list_and_methods(http_server) -> None:
    tool = _http_tool(http_server.port)
    with pytest.raises(ToolExecutionError, match="allow-list"):
        await tool.call({"url": f"http://other.test:{http_server.port}/ok"}, CTX)
    with pytest.raises(ToolExecutionError, match="not allowed"):
        await tool.call({"method": "POST", "url": f"http://app.test:{http_server.port}/ok"}, CTX)
    with pytest.raises(ToolExecutionError, match="metadata"):
        await tool.call({"url": "http://169.254.169.254/"}, CTX)
    with pytest.raises(ValueError, match="allowed host"):
        HttpRequestTool(allowed_hosts=[])
    ported = _http_tool(http_server.port, allowed_ports=[443])
    with pytest.raises(ToolExecutionError, match="port not allowed"):
        await ported.call({"url": f"http://app.test:{http_server.port}/ok"}, CTX)


def test_registry_rejects_duplicates_and_lists_definitions() -> None:
    registry = ToolRegistry([CalculatorTool(), FunctionTool("f", {"type": "object"})])
    with pytest.raises(ValueError, match="duplicate"):
        registry.add(CalculatorTool())
    assert [d.name for d in registry.definitions()] == ["calculator", "f"]
    assert registry.definitions()[1].to_openai()["function"]["parameters"] == {"type": "object"}
    assert "f" in registry
    assert len(registry) == 2


async def test_function_tools_are_never_executed_by_the_worker() -> None:
    tool = FunctionTool("f", {"type": "object"})
    assert tool.kind is ToolKind.FUNCTION
    with pytest.raises(ToolExecutionError, match="client"):
        await tool.call({}, CTX)


def test_argument_validation_messages() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert validate_arguments(schema, {"n": 1}) is None
    assert validate_arguments(schema, {"n": "x"}) == "invalid arguments at n: 'x' is not of type 'integer'"
    assert validate_arguments(schema, {}) == "invalid arguments at arguments: 'n' is a required property"


async def test_build_tools_from_spec() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "model": "m",
            "tools": [
                {"type": "function", "name": "f", "requires_approval": True},
                {"type": "calculator", "name": "calc"},
                {"type": "current_time"},
                {"type": "http_request", "allowed_hosts": ["api.example.com"], "methods": ["POST"]},
            ],
        }
    )
    registry = await build_tools(spec)
    assert [(t.definition.name, t.kind, t.requires_approval) for t in registry] == [
        ("f", ToolKind.FUNCTION, True),
        ("calc", ToolKind.BUILTIN, False),
        ("current_time", ToolKind.BUILTIN, False),
        ("http_request", ToolKind.BUILTIN, False),
    ]
