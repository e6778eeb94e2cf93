"""What a version changed, as the console reads it: fields with their value before and after, tools known by their
name across versions, handoffs by their agent's name."""

from __future__ import annotations

from switchyard.platform.console.pages.agent_view import FieldChange, field_changes

BASE = {
    "name": "a",
    "instructions": "Help.",
    "model": "m",
    "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}, "requires_approval": False}],
    "handoffs": [],
    "guardrails": {"input": [], "output": []},
    "model_params": {"temperature": None},
    "limits": {"max_steps": 25},
    "metadata": {},
}


def test_a_tool_moved_to_another_position_is_only_an_order_change() -> None:
    calculator = {"type": "calculator", "name": "calculator", "requires_approval": False}
    before = {**BASE, "tools": [calculator, *BASE["tools"]]}
    after = {**BASE, "tools": [*BASE["tools"], calculator]}
    assert field_changes(before, after) == [
        FieldChange("tools (in order)", "calculator, function lookup", "function lookup, calculator")
    ]


def test_a_tool_added_a_handoff_removed_and_a_schema_changed_read_as_fields() -> None:
    before = {**BASE, "handoffs": [{"agent_id": "agent_b", "version": None, "description": ""}]}
    schema = {"type": "object", "properties": {"id": {"type": "string"}}}
    after = {
        **BASE,
        "tools": [
            {**BASE["tools"][0], "parameters": schema},
            {"type": "mcp", "server_label": "crm", "allowed_tools": ["find", "list"], "requires_approval": True},
        ],
        "model_params": {"temperature": 0.5},
    }
    changes = {c.field: c for c in field_changes(before, after, {"agent_b": "billing-desk"})}
    assert changes["model_params › temperature"] == FieldChange("model_params › temperature", "(default)", "0.5")
    assert changes["tools (in order)"].after == "function lookup, MCP server crm"
    assert changes["tool MCP server crm › allowed_tools"].after == "find, list"
    assert changes["tool MCP server crm › requires_approval"] == FieldChange(
        "tool MCP server crm › requires_approval", None, "true"
    )
    assert changes["tool function lookup › parameters"].long  # a schema is shown whole, as a block
    assert '"id"' in (changes["tool function lookup › parameters"].after or "")
    assert changes["handoff to billing-desk"] == FieldChange("handoff to billing-desk", "yes", None)
    assert "tool function lookup › name" not in changes  # unchanged fields are not listed
