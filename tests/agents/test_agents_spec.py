"""Agent spec validation: good specs round-trip through JSON, bad ones fail with clear messages."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from switchyard.agents import AgentSpec, FunctionToolSpec, HttpRequestToolSpec, McpToolSpec

GOOD: dict[str, Any] = {
    "name": "support-bot",
    "instructions": "Answer politely.",
    "model": "llama-3.1-8b",
    "tools": [
        {"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}},
        {"type": "calculator"},
        {"type": "current_time"},
        {"type": "http_request", "allowed_hosts": ["api.example.com", "*.example.org"], "methods": ["GET", "POST"]},
        {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/mcp", "requires_approval": True},
    ],
    "model_params": {"temperature": 0.2, "max_tokens": 512},
    "limits": {"max_steps": 8, "max_tokens_per_run": 20000, "max_chip_seconds_per_run": 30, "timeout_s": 120},
    "metadata": {"team": "support"},
}


def test_good_spec_round_trips() -> None:
    spec = AgentSpec.model_validate(GOOD)
    assert isinstance(spec.tools[0], FunctionToolSpec)
    assert isinstance(spec.tools[3], HttpRequestToolSpec)
    assert isinstance(spec.tools[4], McpToolSpec)
    assert spec.tools[4].requires_approval
    assert AgentSpec.model_validate_json(spec.model_dump_json()) == spec


def test_defaults_are_sensible() -> None:
    spec = AgentSpec(name="a", model="m")
    assert spec.limits.max_steps == 25
    assert spec.tools == []
    assert spec.model_params.temperature is None


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_with(name=""), "name"),
        (_with(model=""), "model"),
        (_with(tools=[{"type": "calculator"}, {"type": "calculator"}]), "duplicate tool name 'calculator'"),
        (_with(tools=[{"type": "shell"}]), "does not match any of the expected tags"),
        (_with(tools=[{"type": "function", "name": "bad name!"}]), "String should match pattern"),
        (_with(tools=[{"type": "function", "name": "f", "parameters": {"type": "string"}}]), "type 'object'"),
        (_with(tools=[{"type": "function", "name": "f", "parameters": {"type": 12}}]), "not a valid JSON Schema"),
        (_with(tools=[{"type": "http_request", "allowed_hosts": []}]), "at least 1 item"),
        (_with(tools=[{"type": "http_request", "allowed_hosts": ["http://x.com/"]}]), "host names"),
        (_with(tools=[{"type": "http_request", "allowed_hosts": ["x.com"], "methods": ["DELETE"]}]), "methods"),
        (_with(tools=[{"type": "mcp", "server_label": "x", "server_url": "ftp://x"}]), "server_url"),
        (
            _with(
                tools=[
                    {"type": "mcp", "server_label": "x", "server_url": "https://a.com/mcp"},
                    {"type": "mcp", "server_label": "x", "server_url": "https://b.com/mcp"},
                ]
            ),
            "duplicate MCP server_label",
        ),
        (_with(tools=[{"type": "http_request", "allowed_hosts": ["x.com"], "allowed_ports": [0]}]), "allowed_ports"),
        (_with(model_params={"temperature": 3}), "temperature"),
        (_with(model_params={"max_tokens": 0}), "max_tokens"),
        (_with(limits={"max_steps": 0}), "max_steps"),
        (_with(limits={"timeout_s": -1}), "timeout_s"),
        (_with(limits={"max_chip_seconds_per_run": 0}), "max_chip_seconds_per_run"),
        (_with(unknown_field=1), "Extra inputs are not permitted"),
        (_with(metadata={"k" * 65: "v"}), "metadata keys"),
    ],
)
def test_bad_specs_fail_with_clear_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as error:
        AgentSpec.model_validate(data)
    assert message in str(error.value)
