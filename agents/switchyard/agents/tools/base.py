"""The tool protocol, tool results and the registry the run loop consults.

Three kinds of tool exist (:class:`ToolKind`):

* ``function`` — declared by the tenant, executed by the *client*: the run stops in ``requires_action``
  until the outputs are submitted. The worker never executes them.
* ``builtin`` — executed by the worker (``calculator``, ``current_time``, ``http_request``).
* ``mcp`` — executed by a remote MCP server the worker calls.
* ``handoff`` — ``transfer_to_<agent>``: performed by the run loop itself, which goes on as that agent.
* ``agent`` — another agent called as a tool: the run loop runs it on a context of its own (a frame).

Retry guarantee (:class:`RetrySemantics`). The run loop records a tool call as a step *before* executing it
and its result *after*. When a worker dies between the two, the next worker sees a started step without a
result and asks :meth:`Tool.retry_semantics`:

* ``idempotent`` — the call is executed again (``calculator``, ``current_time``, ``http_request`` GET,
  MCP tools annotated read-only or idempotent): at-least-once, harmless because repeating has no effect.
* ``at_most_once`` — the call is *not* executed again; its step ends with an error output telling the
  model the outcome is unknown (``http_request`` POST, other MCP tools): a side effect never happens twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import jsonschema  # type: ignore[import-untyped]

__all__ = [
    "RetrySemantics",
    "Tool",
    "ToolContext",
    "ToolDefinition",
    "ToolKind",
    "ToolRegistry",
    "ToolResult",
    "mcp_tool_name",
    "validate_arguments",
]


class ToolKind(StrEnum):
    """Who executes a tool: the client (``function``), the worker (``builtin``, ``file_search``) or an MCP server."""

    FUNCTION = "function"
    BUILTIN = "builtin"
    MCP = "mcp"
    FILE_SEARCH = "file_search"
    HANDOFF = "handoff"
    AGENT = "agent"


class RetrySemantics(StrEnum):
    """What happens to a call whose worker died after recording it and before recording its result."""

    IDEMPOTENT = "idempotent"
    AT_MOST_ONCE = "at_most_once"


@dataclass(frozen=True)
class ToolDefinition:
    """What the model is told about a tool: OpenAI-style function name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """The ``tools[]`` entry of an OpenAI chat-completions request."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ToolResult:
    """The output of one tool call as the model will read it; ``is_error`` marks a failure."""

    output: str
    is_error: bool = False

    @classmethod
    def from_value(cls, value: Any) -> ToolResult:
        """Wrap a JSON-able value (strings are kept as they are)."""
        return cls(value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str))


@dataclass
class ToolContext:
    """What a tool may know about the call: ids for logging and idempotency keys, and the run's deadline."""

    run_id: str = ""
    call_id: str = ""
    tenant_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """A tool the run loop can offer to the model."""

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def kind(self) -> ToolKind: ...

    @property
    def requires_approval(self) -> bool:
        """Whether a human must approve each call before it is executed."""
        ...

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        """The guarantee for this particular call (see the module docstring)."""
        ...

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Execute the call (never invoked for ``function`` tools)."""
        ...


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_name(server_label: str, remote_name: str) -> str:
    """The name an MCP server's tool is offered under: ``<server_label>__<tool name>``, characters other than
    letters, digits, ``_`` and ``-`` as ``_``, cut at 64 characters."""
    return f"{server_label}__{_UNSAFE_NAME_CHARS.sub('_', remote_name)}"[:64]


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """Return a readable error if ``arguments`` do not match ``schema``, else ``None``."""
    try:
        jsonschema.validate(arguments, dict(schema))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
        return f"invalid arguments at {where}: {exc.message}"
    return None


class ToolRegistry:
    """The tools of one agent version, by name (names are unique)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register ``tool``; a second tool with the same name is an error."""
        name = tool.definition.name
        if name in self._tools:
            raise ValueError(f"duplicate tool name {name!r}")
        self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        """The definitions offered to the model, in registration order."""
        return [tool.definition for tool in self._tools.values()]
