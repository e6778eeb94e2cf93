"""Responses items: checking what clients send, turning items into the model's messages, and a response's state
into its output items.

Items are stored as OpenAI spells them (with an ``id`` each). The model sees them as chat messages: messages by
role (``developer`` is ``system``), ``function_call`` items as the assistant's tool calls, ``function_call_output``
and finished ``mcp_call`` items as tool results; reasoning, MCP listings and approval items carry nothing for it.

Calls of server-side tools (MCP servers and Switchyard's built-ins) appear as ``mcp_call`` items, the built-ins
under the server label ``switchyard``: every Responses client knows that item as "a tool the server ran". A search
of the tenant's vector stores appears as OpenAI's ``file_search_call`` (its results with ``include:
["file_search_call.results"]``), and an answer that repeats what it found cites the files (``file_citation``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from switchyard.agents import Message, RunState, RunStatus, StepStatus, StepType, ToolCall, ToolKind, ToolRegistry
from switchyard.agents.messages import Role
from switchyard.agents.tools.file_search import FileSearchHit, citations, hits_of
from switchyard.platform.http.errors import InvalidRequest

__all__ = [
    "BUILTIN_SERVER_LABEL",
    "approval_decisions",
    "check_items",
    "input_items",
    "mcp_listings",
    "output_items",
    "output_text",
    "to_messages",
]

BUILTIN_SERVER_LABEL = "switchyard"
_ROLES = {"user", "system", "developer", "assistant"}
_TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
_SILENT = {"reasoning", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "file_search_call"}
_ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "mcp_approval_response": "mcpa",
    "reasoning": "rs",
}
KindOf = Callable[[str], ToolKind | None]


def _item_id(kind: str) -> str:
    return f"{_ITEM_PREFIX.get(kind, 'item')}_{secrets.token_hex(12)}"


MAX_ITEM_ID_LENGTH = 128
"""An item id a client gives is stored as the conversation item's id (``conversation_items.id``)."""


def _bad(at: str, message: str, field: str = "") -> InvalidRequest:
    return InvalidRequest(message, param=f"{at}{'.' + field if field else ''}", code="invalid_input_item")


def _text_of(content: Any, at: str) -> str:
    """The text of a message's content: a string, or its text parts joined (images and files as placeholders)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(at, "content must be a string or a list of content parts", "content")
    texts = []
    for part in content:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _bad(at, "each content part is an object with a type", "content")
        kind = part["type"]
        if kind in _TEXT_PARTS:
            if not isinstance(part.get("text"), str):
                raise _bad(at, f"a {kind} part needs a text string", "content")
            texts.append(part["text"])
        elif kind == "refusal":
            texts.append(str(part.get("refusal", "")))
        elif kind in ("input_image", "input_file", "input_audio"):
            texts.append(f"[{kind.removeprefix('input_')}]")
        else:
            raise _bad(at, f"unsupported content part type {kind!r}", "content")
    return "".join(texts)


def _check(item: Any, at: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _bad(at, "an input item is an object")
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise _bad(at, "an input item needs a type (or a role, for a message)", "type")
    checked = dict(item)
    checked["type"] = kind
    if kind == "message":
        if item.get("role") not in _ROLES:
            raise _bad(at, f"role must be one of {', '.join(sorted(_ROLES))}", "role")
        _text_of(item.get("content"), at)
        if isinstance(item["content"], str):  # stored and listed as OpenAI lists it: content parts
            part = "output_text" if item["role"] == "assistant" else "input_text"
            text_part: dict[str, Any] = {"type": part, "text": item["content"]}
            if part == "output_text":
                text_part["annotations"] = []
            checked["content"] = [text_part]
        checked.setdefault("status", "completed")
    elif kind in ("function_call", "mcp_call"):
        for key in ("call_id", "name", "arguments") if kind == "function_call" else ("name", "arguments"):
            if not isinstance(item.get(key), str):
                raise _bad(at, f"a {kind} item needs {key} (a string)", key)
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise _bad(at, "a function_call_output item needs call_id (a string)", "call_id")
        output = item.get("output")
        checked["output"] = output if isinstance(output, str) else _text_of(output, at)
    elif kind == "mcp_approval_response":
        if not isinstance(item.get("approval_request_id"), str) or not isinstance(item.get("approve"), bool):
            raise _bad(at, "an mcp_approval_response item needs approval_request_id and approve (a boolean)")
    elif kind not in _SILENT:
        raise _bad(at, f"unsupported input item type {kind!r}", "type")
    if not isinstance(checked.get("id"), str):
        checked["id"] = _item_id(kind)
    elif len(checked["id"]) > MAX_ITEM_ID_LENGTH:
        raise _bad(at, f"an item id is at most {MAX_ITEM_ID_LENGTH} characters", "id")
    return checked


def check_items(items: Sequence[Any], *, param: str = "input") -> list[dict[str, Any]]:
    """Items as stored: checked (400 naming the item, ``param[i]``, otherwise), each with an ``id``."""
    return [_check(item, f"{param}[{index}]") for index, item in enumerate(items)]


def input_items(value: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A request's ``input`` as items: text is one user message."""
    if value is None:
        return []
    if isinstance(value, str):
        return check_items([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}])
    return check_items(value)


def to_messages(items: Sequence[dict[str, Any]]) -> list[Message]:
    """The chat messages the model sees for ``items`` (tool calls join the assistant message before them)."""
    messages: list[Message] = []
    for index, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            role: Role = "system" if item["role"] == "developer" else item["role"]
            messages.append(Message(role=role, content=_text_of(item["content"], f"input[{index}]")))
        elif kind in ("function_call", "mcp_call"):
            call_id = item.get("call_id") or item["id"]
            call = ToolCall(id=call_id, name=_tool_name(item), arguments=item["arguments"])
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                messages[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
            else:
                messages.append(Message.assistant(None, [call]))
            if kind == "mcp_call":
                messages.append(Message.tool(call_id, item.get("output") or item.get("error") or ""))
        elif kind == "function_call_output":
            messages.append(Message.tool(item["call_id"], item["output"]))
    return messages


def _tool_name(item: dict[str, Any]) -> str:
    label = item.get("server_label")
    if item["type"] == "mcp_call" and isinstance(label, str) and label != BUILTIN_SERVER_LABEL:
        return f"{label}__{item['name']}"
    return str(item["name"])


def approval_decisions(items: Sequence[dict[str, Any]]) -> dict[str, bool]:
    """``mcp_approval_response`` items as the run loop's decisions, by tool call id."""
    return {
        item["approval_request_id"].removeprefix("mcpr_"): item["approve"]
        for item in items
        if item["type"] == "mcp_approval_response"
    }


def _label_and_name(call: ToolCall, kind: ToolKind | None) -> tuple[str, str]:
    if kind is ToolKind.MCP and "__" in call.name:
        label, name = call.name.split("__", 1)
        return label, name
    return BUILTIN_SERVER_LABEL, call.name


def _message_item(message: Message, found: Sequence[FileSearchHit] = ()) -> dict[str, Any]:
    text = message.content or ""
    part = (
        {"type": "refusal", "refusal": text}
        if message.refusal
        else {"type": "output_text", "text": text, "annotations": citations(text, found), "logprobs": []}
    )
    return {
        "id": message.id or _item_id("message"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def mcp_listings(tools: ToolRegistry, response_id: str) -> list[dict[str, Any]]:
    """One ``mcp_list_tools`` item per MCP server, with the tools it offered (listed as the response started)."""
    servers: dict[str, list[dict[str, Any]]] = {}
    for tool in tools:
        if tool.kind is ToolKind.MCP and "__" in tool.definition.name:
            label, name = tool.definition.name.split("__", 1)
            definition = tool.definition
            servers.setdefault(label, []).append(
                {
                    "name": name,
                    "description": definition.description,
                    "input_schema": dict(definition.parameters),
                    "annotations": None,
                }
            )
    return [
        {"id": f"mcpl_{response_id}_{label}", "type": "mcp_list_tools", "server_label": label, "tools": listed}
        for label, listed in servers.items()
    ]


def _file_search_item(call: ToolCall, output: str, *, failed: bool, with_results: bool) -> dict[str, Any]:
    hits = None if failed else hits_of(output)
    query = call.parsed_arguments().get("query") if call.arguments else None
    return {
        "id": f"fs_{call.id}",
        "type": "file_search_call",
        "status": "failed" if failed or hits is None else "completed",
        "queries": [query] if isinstance(query, str) else [],
        "results": (
            [
                {"file_id": h.file_id, "filename": h.filename, "score": h.score, "text": h.text,
                 "attributes": h.attributes}
                for h in hits
            ]
            if with_results and hits is not None
            else None
        ),
    }  # fmt: skip


def output_items(
    state: RunState,
    kind_of: KindOf,
    *,
    seeded: int = 0,
    listed: Sequence[dict[str, Any]] = (),
    file_search_results: bool = False,
) -> list[dict[str, Any]]:
    """A response's output, from its run state: the MCP servers' tool lists (``listed``), the model's text, the
    client's function calls, the server's tool calls with their results (handoffs between agents among them: an
    ``mcp_call`` named ``transfer_to_<agent>``, never a ``function_call``, which a client would try to execute), and
    the calls awaiting approval.
    ``seeded`` leading messages came from the previous response (calls approved since): only their calls'
    results are this response's."""
    awaiting = state.required_action if state.status is RunStatus.REQUIRES_ACTION else None
    approvals = {c.id for c in awaiting.tool_calls} if awaiting is not None and awaiting.type == "approval" else set()
    answered = {m.tool_call_id for m in state.messages if m.role == "tool"}
    calls = {c.id: c for m in state.messages for c in m.tool_calls}
    failed = {s.tool_call.id for s in state.steps if s.type is StepType.TOOL_CALL and s.tool_call and s.is_error}
    items: list[dict[str, Any]] = [dict(item) for item in listed]
    if state.workflow is not None:
        items.extend(_node_items(state))
        for call in awaiting.tool_calls if awaiting is not None and awaiting.type == "approval" else ():
            kind = kind_of(call.name)
            label, name = (BUILTIN_SERVER_LABEL, call.name) if kind is None else _label_and_name(call, kind)
            items.append(  # a workflow's user_approval node, or a tool node's call of a tool that asks for approval
                {
                    "id": f"mcpr_{call.id}",
                    "type": "mcp_approval_request",
                    "server_label": label,
                    "name": name,
                    "arguments": call.arguments,
                }
            )
    found: list[FileSearchHit] = []  # what this response's file searches found, for its answers' citations
    for position, message in enumerate(state.messages):
        if message.role == "assistant":
            if position >= seeded and message.content:
                items.append(_message_item(message, found))
            for call in message.tool_calls:
                kind = kind_of(call.name)
                if call.id in approvals:
                    label, name = _label_and_name(call, kind)
                    items.append(
                        {
                            "id": f"mcpr_{call.id}",
                            "type": "mcp_approval_request",
                            "server_label": label,
                            "name": name,
                            "arguments": call.arguments,
                        }
                    )
                elif kind is ToolKind.FUNCTION and call.id not in answered and position >= seeded:
                    items.append(_function_call_item(call))
        elif message.role == "tool" and message.tool_call_id in calls:
            call = calls[message.tool_call_id]
            kind = kind_of(call.name)
            if kind is ToolKind.FUNCTION:
                continue  # the client's own output (or an argument error the model was told about)
            error = call.id in failed
            if kind is ToolKind.FILE_SEARCH:
                if not error:
                    found.extend(hits_of(message.content) or [])
                items.append(
                    _file_search_item(call, message.content or "", failed=error, with_results=file_search_results)
                )
                continue
            label, name = _label_and_name(call, kind)
            items.append(
                {
                    "id": f"mcp_{call.id}",
                    "type": "mcp_call",
                    "status": "failed" if error else "completed",
                    "server_label": label,
                    "name": name,
                    "arguments": call.arguments,
                    "output": None if error else message.content,
                    "error": message.content if error else None,
                    "approval_request_id": None,
                }
            )
    return items


def _node_items(state: RunState) -> list[dict[str, Any]]:
    """A workflow's nodes that called something (or call it now): an agent node as the server's tool call (the
    node, its input, the answer), a tool node's MCP or built-in tool as that tool's call, and a call of the
    client's function awaiting its output as a ``function_call``."""
    items: list[dict[str, Any]] = []
    for step in state.steps:
        call = step.tool_call
        if step.depth != 0 or call is None or step.tool_kind is ToolKind.HANDOFF:
            continue
        done = step.status is not StepStatus.IN_PROGRESS
        if step.tool_kind is ToolKind.FUNCTION:
            if not done:
                items.append(_function_call_item(call))
            continue  # an answered one's output is the client's own
        label, name = (
            (BUILTIN_SERVER_LABEL, call.name)
            if step.tool_kind is ToolKind.AGENT
            else _label_and_name(call, step.tool_kind)
        )
        items.append(
            {
                "id": f"mcp_{call.id}",
                "type": "mcp_call",
                "status": ("failed" if step.is_error else "completed") if done else "in_progress",
                "server_label": label,
                "name": name,
                "arguments": call.arguments,
                "output": None if step.is_error else step.output,
                "error": step.output if step.is_error else None,
                "approval_request_id": None,
            }
        )
    return items


def _function_call_item(call: ToolCall) -> dict[str, Any]:
    return {
        "id": f"fc_{call.id}",
        "type": "function_call",
        "status": "completed",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }


def output_text(items: Sequence[dict[str, Any]]) -> str:
    """The text of the output's messages, as the SDKs' ``output_text`` has it."""
    return "".join(
        part["text"] for item in items if item["type"] == "message" for part in item["content"] if "text" in part
    )
