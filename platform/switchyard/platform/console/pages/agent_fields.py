"""The agent builder's fields: for each part of an agent version (model parameters, limits, each tool type, each
guardrail type, a handoff) the form fields it has, their labels, kinds and hints. Keys are the spec's field names;
what a value may be is the spec's to say (``switchyard.agents``), not these."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GUARDRAIL_TYPES",
    "HANDOFF_FIELDS",
    "LIMIT_FIELDS",
    "MODEL_PARAM_FIELDS",
    "OUTPUT_FIELDS",
    "TOOL_TYPES",
    "FormField",
    "field_id",
    "guardrail_fields",
    "tool_fields",
]


@dataclass(frozen=True, slots=True)
class FormField:
    """One field of a row: its key in the definition, label, kind (how its text becomes a value) and a hint."""

    key: str
    label: str
    kind: str  # text, textarea, int, float, bool, json, lines, ints, headers, methods, agent, model
    hint: str = ""
    required: bool = False


_NAME = FormField("name", "Tool name", "text", "letters, digits, _ and - (what the model calls)")
_APPROVAL = FormField("requires_approval", "Requires approval (a person approves each call)", "bool")

TOOL_TYPES: dict[str, tuple[str, list[FormField]]] = {
    "function": (
        "Function (your code runs it)",
        [
            FormField("name", "Tool name", "text", "letters, digits, _ and - (what the model calls)", required=True),
            FormField("description", "Description", "text", "when the model should call it"),
            FormField("parameters", "Parameters (JSON Schema of an object)", "json", required=True),
            _APPROVAL,
        ],
    ),
    "calculator": ("Calculator (built-in)", [_NAME, _APPROVAL]),
    "current_time": ("Current time (built-in)", [_NAME, _APPROVAL]),
    "http_request": (
        "HTTP request (built-in)",
        [
            _NAME,
            FormField("allowed_hosts", "Allowed hosts", "lines", "one a line; *.example.com for subdomains", True),
            FormField("allowed_ports", "Allowed ports", "ints", "one a line (empty: any)"),
            FormField("methods", "Methods", "methods"),
            FormField("max_response_bytes", "Largest response (bytes)", "int"),
            FormField("timeout_s", "Timeout (seconds)", "float"),
            FormField("max_redirects", "Redirects followed", "int"),
            _APPROVAL,
        ],
    ),
    "mcp": (
        "MCP server",
        [
            FormField("server_label", "Server label", "text", "its tools are offered as <label>__<tool>", True),
            FormField("server_url", "Server URL", "text", "https://… (streamable HTTP)", True),
            FormField("allowed_tools", "Allowed tools", "lines", "one a line (empty: all the server offers)"),
            FormField(
                "headers",
                "Headers (write-only)",
                "headers",
                "Name: value, one a line; stored values show as <redacted> and are kept while the line is",
            ),
            FormField("requires_approval", "Requires approval (a person approves each call)", "bool"),
            FormField("timeout_s", "Timeout (seconds)", "float"),
        ],
    ),
    "agent": (
        "Another agent (as a tool)",
        [
            FormField("agent_id", "Agent", "agent", required=True),
            FormField("version", "Version", "int", "empty: its latest"),
            FormField("name", "Tool name", "text", "empty: the agent's name"),
            FormField("description", "Description", "text", "when the model should call it"),
            _APPROVAL,
        ],
    ),
    "file_search": (
        "File search (vector stores)",
        [
            FormField("vector_store_ids", "Vector store ids", "lines", "one a line", True),
            FormField("max_num_results", "Results", "int"),
            FormField("filters", "Filters (JSON, optional)", "json"),
            FormField("ranking_options", "Ranking options (JSON, optional)", "json"),
        ],
    ),
}
"""Each tool type of the spec: its label and fields."""

_GUARD_NAME = FormField("name", "Tool name", "text", "named in the error when it trips")
GUARDRAIL_TYPES: dict[str, tuple[str, list[FormField]]] = {
    "regex": (
        "Regular expression (trips on a match)",
        [
            _GUARD_NAME,
            FormField("pattern", "Pattern", "text", required=True),
            FormField("ignore_case", "Ignore case", "bool"),
        ],
    ),
    "json_schema": (
        "JSON Schema (trips unless valid JSON)",
        [_GUARD_NAME, FormField("schema", "Schema", "json", required=True)],
    ),
    "max_length": ("Longest text", [_GUARD_NAME, FormField("max_chars", "Most characters", "int", required=True)]),
    "agent": (
        "Agent judge",
        [_GUARD_NAME, FormField("agent_id", "Agent", "agent", required=True), FormField("version", "Version", "int")],
    ),
}
HANDOFF_FIELDS = [
    FormField("agent_id", "Agent", "agent", required=True),
    FormField("version", "Version", "int", "empty: its latest"),
    FormField("description", "When to transfer", "text"),
]
MODEL_PARAM_FIELDS = [
    FormField("max_tokens", "Largest answer (max_tokens)", "int", "output tokens per model call"),
    FormField("temperature", "Temperature", "float", "0 to 2 (empty: the model's default)"),
    FormField("top_p", "Top p", "float", "above 0, at most 1"),
    FormField("stop", "Stop sequences", "lines", "one a line, at most 4"),
    FormField("seed", "Seed", "int"),
]
OUTPUT_FIELDS = [
    FormField("schema", "Answer schema", "json", "a JSON Schema of type object; empty: the agent answers in text"),
    FormField("name", "Format name", "text", "what the model is told the format is called (default: answer)"),
]
LIMIT_FIELDS = [
    FormField("max_steps", "Model calls per run", "int"),
    FormField("max_tokens_per_run", "Tokens per run", "int", "input and output of all calls (empty: no limit)"),
    FormField("max_chip_seconds_per_run", "Chip-seconds per run", "float", "empty: no limit"),
    FormField("timeout_s", "Run timeout (seconds)", "float"),
    FormField("max_handoffs", "Handoffs per run", "int"),
    FormField("requires_action_ttl_s", "Wait for tool outputs (seconds)", "float"),
]


def tool_fields(tool_type: str) -> list[FormField]:
    return TOOL_TYPES[tool_type][1] if tool_type in TOOL_TYPES else []


def guardrail_fields(guard_type: str) -> list[FormField]:
    return GUARDRAIL_TYPES[guard_type][1] if guard_type in GUARDRAIL_TYPES else []


def field_id(name: str) -> str:
    """The HTML id of the field named ``name`` (dots make CSS selectors awkward)."""
    return name.replace(".", "-")
