"""A response's items as a trace page shows them: its input (messages, tool outputs the client gave, approvals) and
its output (messages, function calls, file searches, MCP and built-in tool calls, approval requests, tool lists).

Items are read as stored (``responses.input_items`` and ``responses.output``); a type the page does not know is
shown as its JSON rather than left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from switchyard.platform.console.pages.trace_view import pretty_json

__all__ = ["ItemView", "item_views"]


@dataclass(frozen=True, slots=True)
class ItemView:
    """One item: its type, a title (a role, a tool's name), its status, and what it holds as text."""

    type: str
    title: str
    status: str = ""
    text: str = ""
    arguments: str = ""
    output: str = ""
    error: str = ""
    lines: list[str] = field(default_factory=list)  # queries, results, tools offered


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict):
            kind = str(part.get("type", ""))
            value = part.get("text", part.get("refusal"))
            parts.append(str(value) if value is not None else f"[{kind.removeprefix('input_')}]")
    return "".join(parts)


def _item_view(item: dict[str, Any]) -> ItemView:
    kind = str(item.get("type", "message"))
    status = str(item.get("status") or "")
    if kind == "message":
        return ItemView(kind, str(item.get("role", "")), status, text=_text(item.get("content")))
    if kind == "function_call":
        return ItemView(kind, str(item.get("name", "")), status, arguments=pretty_json(item.get("arguments")))
    if kind == "function_call_output":
        output = pretty_json(_text(item.get("output")))
        return ItemView(kind, f"output of {item.get('call_id', '')}", status, output=output)
    if kind == "mcp_call":
        label = item.get("server_label")
        return ItemView(
            kind,
            f"{label} · {item.get('name')}" if label else str(item.get("name", "")),
            status,
            arguments=pretty_json(item.get("arguments")),
            output=pretty_json(item.get("output")),
            error=str(item.get("error") or ""),
        )
    if kind == "mcp_approval_request":
        return ItemView(kind, str(item.get("name", "")), status, arguments=pretty_json(item.get("arguments")))
    if kind == "mcp_approval_response":
        decision = "approved" if item.get("approve") else "denied"
        return ItemView(kind, f"{decision}: {item.get('approval_request_id', '')}", status)
    if kind == "file_search_call":
        lines = [f"query: {q}" for q in item.get("queries") or []]
        for hit in item.get("results") or []:
            lines.append(f"{hit.get('filename')} (score {hit.get('score')}): {hit.get('text', '')}")
        return ItemView(kind, "file_search", status, lines=lines)
    if kind == "mcp_list_tools":
        tools = [str(tool.get("name")) for tool in item.get("tools") or [] if isinstance(tool, dict)]
        return ItemView(kind, str(item.get("server_label", "")), status, lines=tools)
    return ItemView(kind, kind, status, text=json.dumps(item, indent=2, ensure_ascii=False))


def item_views(items: list[dict[str, Any]]) -> list[ItemView]:
    """Each stored item's view, in order."""
    return [_item_view(item) for item in items if isinstance(item, dict)]
