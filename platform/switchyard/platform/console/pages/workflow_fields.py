"""The workflow editor's fields: for each node type of the spec (``switchyard.agents.workflows``) its form fields and
its outgoing connections, with labels a person reads. Keys are the spec's field names; what a value may be is the
spec's to say, not these. Field kinds are the agent builder's (``agent_fields.FormField``) plus ``node`` (a select of
the workflow's nodes) and ``var`` (a select of its state variables)."""

from __future__ import annotations

from dataclasses import dataclass

from switchyard.platform.console.pages.agent_fields import FormField

__all__ = ["NODE_TYPES", "STATE_TYPES", "NodeType", "edge_keys", "node_fields"]


@dataclass(frozen=True, slots=True)
class NodeType:
    """A node type: how it is named, its fields, and its connections as (field key, "then go to" label)."""

    label: str
    fields: list[FormField]
    edges: list[tuple[str, str]]


_NEXT = [("next", "Then go to")]
_OUTPUT_TO = FormField("output_to", "Store the result in variable", "var", "empty: only last_output")
_INPUT = FormField("input", "Input (template)", "textarea", "{{ input }}, {{ last_output }}, {{ state.x }}")

NODE_TYPES: dict[str, NodeType] = {
    "agent": NodeType(
        "Agent",
        [
            FormField("agent_id", "Agent", "agent", required=True),
            FormField("version", "Version", "int", "empty: its latest"),
            FormField("input", "Input (template)", "textarea", "empty: the last answer, else the workflow's input"),
            _OUTPUT_TO,
        ],
        _NEXT,
    ),
    "if_else": NodeType(
        "If / else",
        [FormField("condition", "Condition (expression)", "text", "e.g. contains(lower(input), 'refund')", True)],
        [("then", "When true, go to"), ("else", "Otherwise, go to")],
    ),
    "while": NodeType(
        "While loop",
        [
            FormField("condition", "Condition (expression)", "text", "e.g. state.rounds < 3", True),
            FormField("max_iterations", "Most iterations", "int", "1 to 100", True),
        ],
        [("body", "Loop body starts at"), ("next", "After the loop, go to")],
    ),
    "user_approval": NodeType(
        "User approval",
        [FormField("message", "Approval message (template)", "textarea", "what the person approves", True)],
        [("approved", "When approved, go to"), ("rejected", "When rejected, go to")],
    ),
    "transform": NodeType(
        "Transform",
        [
            FormField("template", "Template (JSON)", "json", "a JSON value; strings may hold {{ … }}", True),
            FormField("output_to", "Store the result in variable", "var", required=True),
        ],
        _NEXT,
    ),
    "set_state": NodeType(
        "Set variables",
        [FormField("assignments", "Assignments", "headers", "variable: expression, one a line", True)],
        _NEXT,
    ),
    "guardrail": NodeType(
        "Guardrail",
        [
            _INPUT,
            FormField(
                "guardrails", "Checks (JSON list)", "json", 'e.g. [{"type": "max_length", "max_chars": 500}]', True
            ),
            FormField("reason_to", "Store why it tripped in variable", "var", "a string variable"),
        ],
        [("passed", "When it passes, go to"), ("tripped", "When it trips, go to")],
    ),
    "function": NodeType(
        "Function tool call",
        [
            FormField("tool", "Tool name", "text", "one of the workflow's tools", True),
            FormField("arguments", "Arguments (JSON template)", "json"),
            _OUTPUT_TO,
        ],
        _NEXT,
    ),
    "mcp": NodeType(
        "MCP tool call",
        [
            FormField("server_label", "MCP server label", "text", "one of the workflow's MCP tools", True),
            FormField("tool", "Tool on the server", "text", required=True),
            FormField("arguments", "Arguments (JSON template)", "json"),
            _OUTPUT_TO,
        ],
        _NEXT,
    ),
    "file_search": NodeType(
        "File search",
        [FormField("query", "Query (template)", "text", "empty: {{ input }}"), _OUTPUT_TO],
        _NEXT,
    ),
    "end": NodeType(
        "End",
        [FormField("output", "Final answer (template)", "textarea", "empty: the last agent's answer")],
        [],
    ),
}
"""Each node type of the spec, in the order the "add a node" select offers them."""

STATE_TYPES = ("string", "number", "integer", "boolean", "object", "array")
"""The types of a state variable (``StateVar.type``)."""


def node_fields(node_type: str) -> list[FormField]:
    return NODE_TYPES[node_type].fields if node_type in NODE_TYPES else []


def edge_keys(node_type: str) -> list[str]:
    return [key for key, _ in NODE_TYPES[node_type].edges] if node_type in NODE_TYPES else []
