"""What a response runs: the agent spec and call options its request (or the agent it names) defines.

Without ``prompt`` the request is the definition: its ``model``, ``instructions``, ``tools``, sampling parameters
and ``text.format``. With ``prompt: {"id": <agent id>, "version": ...}`` it is that agent version — instructions
(``{{variables}}`` filled in), model, tools, parameters and limits — plus the request's own function tools and
``text.format``; the request's ``model`` is then ignored, so a client configured with any model name runs the agent
as defined. Checked here, before anything is stored: every tool (400 naming ``tools[i]``) and the model parameters.
``include: ["message.output_text.logprobs"]`` makes every model call ask for logprobs (``top_logprobs`` of them).
An MCP tool's ``headers`` (and ``authorization``, sent as ``Authorization: Bearer``) are sealed in the definition
and redacted in the request itself, which the response echoes: they are sent to the MCP server and shown to no one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from switchyard.agents import AgentSpec, ModelParams, RunLimits
from switchyard.agents.tools.secrets import REDACTED, kept_secrets, redact_tool, seal_tool_secrets
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.responses.schemas import OUTPUT_TEXT_LOGPROBS, ResponseCreate

__all__ = ["ResponseDefinition", "define"]

_BUILTINS = {"calculator", "current_time", "http_request"}
_SYNTAXES = ("lark", "regex")
FILE_SEARCH_FIELDS = ("vector_store_ids", "max_num_results", "filters", "ranking_options")
_HOSTED = {
    "web_search",
    "web_search_preview",
    "code_interpreter",
    "computer_use_preview",
    "image_generation",
}


@dataclass(frozen=True)
class ResponseDefinition:
    spec: AgentSpec
    options: dict[str, Any]
    """Chat-completions fields of every model call: ``response_format``, ``tool_choice``, ``parallel_tool_calls``,
    ``logprobs``/``top_logprobs``."""
    agent_id: str | None = None
    agent_version: int | None = None


def _custom_tool(tool: dict[str, Any], param: str) -> None:
    """Check a ``custom`` tool (free-form input, optionally a grammar), as chat completions accept it."""
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise InvalidRequest("a custom tool needs a name", param=f"{param}.name", code="invalid_tool")
    if tool.get("description") is not None and not isinstance(tool["description"], str):
        raise InvalidRequest("a custom tool's description is text", param=f"{param}.description", code="invalid_tool")
    text_format = tool.get("format")
    if text_format is None:
        return
    kind = text_format.get("type") if isinstance(text_format, dict) else None
    grammar = text_format.get("definition") if isinstance(text_format, dict) else None
    if kind == "text" or (kind == "grammar" and isinstance(grammar, str) and text_format.get("syntax") in _SYNTAXES):
        return
    raise InvalidRequest(
        'a custom tool\'s format is {"type": "text"} or {"type": "grammar", "syntax": "lark" or "regex", '
        '"definition": ...}',
        param=f"{param}.format",
        code="invalid_tool",
    )


def _tool(tool: dict[str, Any], index: int) -> dict[str, Any] | None:
    """The agent tool a request's tool is, or ``None`` for a ``custom`` tool: checked and echoed, but not offered to
    the model (the agent loop has no custom tools; the simulated model never calls them, as in chat)."""
    kind = tool.get("type")
    param = f"tools[{index}]"
    if kind == "custom":
        _custom_tool(tool, param)
        return None
    if kind == "function":
        name = tool.get("name")
        if not isinstance(name, str):
            raise InvalidRequest("a function tool needs a name", param=f"{param}.name", code="invalid_tool")
        return {
            "type": "function",
            "name": name,
            "description": tool.get("description") or "",
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
    if kind == "mcp":
        approval = tool.get("require_approval", "always")
        allowed = tool.get("allowed_tools")
        if isinstance(allowed, dict):
            allowed = allowed.get("tool_names")
        spec: dict[str, Any] = {
            "type": "mcp",
            "server_label": tool.get("server_label"),
            "server_url": tool.get("server_url"),
            "requires_approval": approval != "never",
            "headers": _mcp_headers(tool, param),
        }
        if allowed is not None:
            spec["allowed_tools"] = allowed
        return spec
    if kind in _BUILTINS:
        return dict(tool)
    if kind == "file_search":  # the tenant's vector stores, searched on the server
        return {key: tool[key] for key in FILE_SEARCH_FIELDS if tool.get(key) is not None} | {"type": "file_search"}
    if kind in _HOSTED:
        raise InvalidRequest(
            f"OpenAI's hosted tool {kind!r} is not served here; use an MCP server (type 'mcp') or a function tool",
            param=f"{param}.type",
            code="unsupported_tool",
        )
    raise InvalidRequest(f"unsupported tool type {kind!r}", param=f"{param}.type", code="unsupported_tool")


def _mcp_headers(tool: dict[str, Any], param: str) -> Any:
    """The headers to send to an MCP server: ``headers``, plus ``authorization`` as a bearer token."""
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict):
        return headers  # the spec's validation names it
    token = tool.get("authorization")
    if isinstance(token, str) and token and not any(name.lower() == "authorization" for name in headers):
        headers = {**headers, "Authorization": f"Bearer {token}"}
    for name, value in headers.items():
        if value == REDACTED:
            raise InvalidRequest(
                f"header {name!r} is {REDACTED!r}: a response keeps no secret to reuse, send the value",
                param=f"{param}.headers.{name}",
                code="invalid_value",
            )
    return headers


def _response_format(data: ResponseCreate) -> dict[str, Any] | None:
    text_format = data.text.format if data.text is not None else None
    if text_format is None or text_format.get("type") == "text":
        return None
    kind = text_format.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = text_format.get("schema")
        if not isinstance(schema, dict):
            raise InvalidRequest("text.format json_schema needs a schema object", param="text.format.schema")
        json_schema = {"name": text_format.get("name") or "output", "schema": schema}
        for key in ("strict", "description"):
            if text_format.get(key) is not None:
                json_schema[key] = text_format[key]
        return {"type": "json_schema", "json_schema": json_schema}
    raise InvalidRequest(f"unsupported text.format type {kind!r}", param="text.format.type")


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    if choice is None or isinstance(choice, str):
        return choice
    kind = choice.get("type")
    if kind == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    if kind == "mcp" and isinstance(choice.get("server_label"), str):
        if isinstance(choice.get("name"), str):
            return {"type": "function", "function": {"name": f"{choice['server_label']}__{choice['name']}"}}
        return "required"
    if kind == "allowed_tools":
        return choice.get("mode", "auto")
    if kind == "custom" and isinstance(choice.get("name"), str):
        return None  # a custom tool is never offered to the model: nothing to force
    raise InvalidRequest(f"unsupported tool_choice {choice!r}", param="tool_choice", code="invalid_tool_choice")


def _fill(instructions: str, variables: dict[str, Any] | None) -> str:
    if not variables:
        return instructions

    def value(match: re.Match[str]) -> str:
        found = variables.get(match.group(1))
        return match.group(0) if found is None else str(found)

    return re.sub(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}", value, instructions)


def define(data: ResponseCreate, agent: tuple[str, int, AgentSpec] | None) -> ResponseDefinition:
    """The definition of a response to ``data``; ``agent`` is ``(id, version, spec)`` when ``prompt`` names one."""
    tools = [offered for index, tool in enumerate(data.tools or []) if (offered := _tool(tool, index)) is not None]
    if data.tools:  # what the response echoes: the secrets' names, never their values
        data.tools[:] = [redact_tool(tool) for tool in data.tools]
    options: dict[str, Any] = {}
    response_format = _response_format(data)
    if response_format is not None:
        options["response_format"] = response_format
    tool_choice = _tool_choice(data.tool_choice)
    if tool_choice is not None:
        options["tool_choice"] = tool_choice
    if data.parallel_tool_calls is not None:
        options["parallel_tool_calls"] = data.parallel_tool_calls
    if OUTPUT_TEXT_LOGPROBS in (data.include or ()):  # each model call asks for logprobs, as a chat client would
        options["logprobs"] = True
        options["top_logprobs"] = data.top_logprobs or 0
    params = {
        "temperature": data.temperature,
        "top_p": data.top_p,
        "max_tokens": data.max_output_tokens,
    }
    try:
        if agent is not None:
            agent_id, version, base = agent
            instructions = _fill(base.instructions, data.prompt.variables if data.prompt else None)
            if data.instructions:
                instructions = f"{instructions}\n\n{data.instructions}" if instructions else data.instructions
            merged = base.model_dump(mode="json")
            merged["instructions"] = instructions
            merged["tools"] = [*merged["tools"], *tools]
            merged["model_params"] = {**merged["model_params"], **{k: v for k, v in params.items() if v is not None}}
            spec = AgentSpec.model_validate(merged, strict=False)
            return ResponseDefinition(seal_tool_secrets(spec, kept=kept_secrets(base)), options, agent_id, version)
        limits = RunLimits(max_steps=(data.max_tool_calls or 24) + 1)
        spec = AgentSpec.model_validate(
            {
                "name": "response",
                "model": data.model,
                "instructions": data.instructions or "",
                "tools": tools,
                "model_params": ModelParams.model_validate(params, strict=False).model_dump(),
                "limits": limits.model_dump(),
            },
            strict=False,
        )
        return ResponseDefinition(seal_tool_secrets(spec), options)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = [str(part) for part in error["loc"]]
        param = "tools" if location and location[0] == "tools" else ".".join(location) or None
        if param == "tools" and len(location) > 1:
            param = f"tools[{location[1]}]" + "".join(f".{part}" for part in location[3:])
        raise InvalidRequest(f"{'.'.join(location)}: {error['msg']}", param=param, code="invalid_request") from None
