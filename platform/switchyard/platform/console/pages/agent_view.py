"""How the console reads an agent definition to a person: its tools, handoffs and guardrails named, and what
changed between two versions as fields with their value before and after (not a diff of JSON text)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldChange", "describe_guardrail", "describe_tool", "field_changes", "tool_key"]

_WHOLE = {"parameters", "filters", "ranking_options", "schema", "headers"}  # shown whole, as JSON
_SECTIONS = ("name", "model", "instructions", "model_params", "limits", "metadata")


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One changed field: where (``Tool lookup › parameters``), and its value before and after (``None``: absent)."""

    field: str
    before: str | None
    after: str | None

    @property
    def long(self) -> bool:
        """Shown as a block (several lines), not inline."""
        return any(v is not None and ("\n" in v or len(v) > 80) for v in (self.before, self.after))


def tool_key(tool: Mapping[str, Any]) -> str:
    """A tool's identity across versions: its type and name (an MCP server's label, an agent tool's agent)."""
    kind = tool.get("type", "?")
    if kind == "mcp":
        return f"MCP server {tool.get('server_label')}"
    if kind == "agent":
        return f"agent tool {tool.get('name') or tool.get('agent_id')}"
    if kind == "file_search":
        return "file_search"
    return f"{kind} {tool.get('name')}" if tool.get("name") != kind else str(kind)


def describe_tool(tool: Mapping[str, Any], agent_names: Mapping[str, str]) -> dict[str, str]:
    """Type, name (an MCP server's label and URL, an agent tool's agent), and approval, as the agent page shows."""
    kind = str(tool.get("type", "?"))
    name = str(tool.get("name") or "")
    detail = ""
    if kind == "mcp":
        name = str(tool.get("server_label"))
        allowed = tool.get("allowed_tools")
        detail = f"{tool.get('server_url')} · " + ("all tools" if allowed is None else "tools: " + ", ".join(allowed))
        if tool.get("headers"):
            detail += " · headers: " + ", ".join(sorted(tool["headers"]))
    elif kind == "agent":
        agent = agent_names.get(str(tool.get("agent_id")), str(tool.get("agent_id")))
        name = name or agent
        version = tool.get("version")
        detail = f"calls {agent}" + (f" v{version}" if version else " (latest)")
    elif kind == "function":
        properties = (tool.get("parameters") or {}).get("properties") or {}
        detail = "arguments: " + (", ".join(properties) if properties else "none")
    elif kind == "http_request":
        detail = "hosts: " + ", ".join(tool.get("allowed_hosts") or [])
    elif kind == "file_search":
        name = "file_search"
        detail = "stores: " + ", ".join(tool.get("vector_store_ids") or [])
    if tool.get("description"):
        detail = f"{tool['description']} · {detail}" if detail else str(tool["description"])
    approval = "asks approval" if tool.get("requires_approval") else "runs without approval"
    return {"type": kind, "name": name, "detail": detail, "approval": approval}


def describe_guardrail(check: Mapping[str, Any], agent_names: Mapping[str, str]) -> str:
    kind = check.get("type")
    if kind == "regex":
        what = f"trips on a match of {check.get('pattern')!r}" + (
            " (ignoring case)" if check.get("ignore_case") else ""
        )
    elif kind == "json_schema":
        what = "trips unless JSON valid against its schema"
    elif kind == "max_length":
        what = f"trips past {check.get('max_chars'):,} characters"
    else:
        agent = agent_names.get(str(check.get("agent_id")), str(check.get("agent_id")))
        what = f"{agent} judges it" + (f" (v{check['version']})" if check.get("version") else "")
    return f"{check.get('name') or kind}: {what}"


def _shown(value: Any) -> str:
    if value is None:
        return "(default)"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
        return ", ".join(str(item) for item in value) if value else "(none)"  # a list of names reads as one
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, sort_keys=True)
    return json.dumps(value)


def _flat(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value and path.rsplit(" › ", 1)[-1] not in _WHOLE:
        for key, item in value.items():
            _flat(item, f"{path} › {key}" if path else key, out)
    else:
        out[path] = value


def _fields(definition: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A definition flattened to ``field → value``: tools keyed by their identity, handoffs by their agent,
    guardrails by position."""
    out: dict[str, Any] = {}
    for section in _SECTIONS:
        if section in definition:
            _flat(definition[section], section, out)
    tools = definition.get("tools", [])
    out["tools (in order)"] = [tool_key(tool) for tool in tools]  # the order the model reads them in
    for tool in tools:
        for key, value in tool.items():
            if key != "type":
                _flat(value, f"tool {tool_key(tool)} › {key}", out)
    for handoff in definition.get("handoffs", []):
        target = str(handoff.get("agent_id"))
        label = f"handoff to {names.get(target, target)}"
        out[label] = "yes"
        for key, value in handoff.items():
            if key != "agent_id":
                _flat(value, f"{label} › {key}", out)
    for where in ("input", "output"):
        for index, check in enumerate((definition.get("guardrails") or {}).get(where, [])):
            for key, value in check.items():
                _flat(value, f"{where} guardrail {index + 1} › {key}", out)
    return out


def field_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], agent_names: Mapping[str, str] | None = None
) -> list[FieldChange]:
    """The fields whose value differs between two definitions, in the order the newer one lists them (agents
    named by ``agent_names`` where it knows them)."""
    names = agent_names or {}
    older, newer = _fields(before, names), _fields(after, names)
    order = list(newer) + [key for key in older if key not in newer]
    return [
        FieldChange(
            key,
            _shown(older[key]) if key in older else None,
            _shown(newer[key]) if key in newer else None,
        )
        for key in order
        if older.get(key, ...) != newer.get(key, ...)
    ]
