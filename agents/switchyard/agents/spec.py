"""The agent specification: what a tenant defines and every run of a version uses."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

import jsonschema  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchyard.agents.sizes import checked_metadata, schema_nodes
from switchyard.agents.workflows.spec import WorkflowSpec

__all__ = [
    "MAX_TOOLS_SCHEMA_NODES",
    "MAX_TOOL_SCHEMA_NODES",
    "AgentGuardrail",
    "AgentSpec",
    "AgentToolSpec",
    "CalculatorToolSpec",
    "CurrentTimeToolSpec",
    "FunctionToolSpec",
    "GuardrailSpec",
    "Guardrails",
    "HandoffSpec",
    "HttpRequestToolSpec",
    "JsonSchemaGuardrail",
    "MaxLengthGuardrail",
    "McpToolSpec",
    "ModelParams",
    "RegexGuardrail",
    "RunLimits",
    "ToolSpec",
]

_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_AGENT_ID_PATTERN = r"^agent_[A-Za-z0-9]{1,64}$"
# Checking a schema against JSON Schema's metaschema costs ~0.06 ms of CPU a node, on the event loop that serves
# every tenant (a 107 KB allOf bomb: 1.2 s); these bound it to ~60 ms a tool and ~300 ms a spec, once per schema
MAX_TOOL_SCHEMA_NODES = 1_000  # one function tool's parameters: its objects, arrays and the values in them
MAX_TOOLS_SCHEMA_NODES = 5_000  # all of a spec's function tools together


@functools.lru_cache(maxsize=256)
def _schema_error(canonical: str) -> str | None:
    """Why the schema (as canonical JSON) is no valid JSON Schema, or ``None``: checked once per distinct schema
    (an agent's tools are validated again at every run, a response's at admission and in its run)."""
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(canonical))
    except jsonschema.SchemaError as exc:
        return str(exc.message)
    return None


class _Strict(BaseModel):
    # strict: a JSON body's values keep their types ("yes" is not true, "7" is not 7), as the API documents them
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class FunctionToolSpec(_Strict):
    """A tool the client executes; the run stops in ``requires_action`` until its outputs arrive."""

    type: Literal["function"] = "function"
    name: str = Field(pattern=_NAME_PATTERN, description="unique within the agent")
    description: str = Field(default="", max_length=1024)
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments (an object schema)",
    )
    requires_approval: bool = Field(default=False, description="a human approves each call first")

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if schema_nodes(value, past=MAX_TOOL_SCHEMA_NODES) > MAX_TOOL_SCHEMA_NODES:
            raise ValueError(f"parameters has more than {MAX_TOOL_SCHEMA_NODES:,} nodes (JSON values, nested)")
        error = _schema_error(json.dumps(value, sort_keys=True))
        if error is not None:
            raise ValueError(f"parameters is not a valid JSON Schema: {error}")
        if value.get("type") != "object":
            raise ValueError("parameters must be a JSON Schema with type 'object'")
        return value


class CalculatorToolSpec(_Strict):
    """The built-in safe arithmetic tool."""

    type: Literal["calculator"] = "calculator"
    name: str = Field(default="calculator", pattern=_NAME_PATTERN)
    requires_approval: bool = False


class CurrentTimeToolSpec(_Strict):
    """The built-in clock tool."""

    type: Literal["current_time"] = "current_time"
    name: str = Field(default="current_time", pattern=_NAME_PATTERN)
    requires_approval: bool = False


class HttpRequestToolSpec(_Strict):
    """The built-in HTTP tool, restricted to allow-listed hosts and guarded against SSRF."""

    type: Literal["http_request"] = "http_request"
    name: str = Field(default="http_request", pattern=_NAME_PATTERN)
    allowed_hosts: list[str] = Field(min_length=1, description="host names or '*.example.com' patterns")
    allowed_ports: list[int] | None = Field(default=None, description="restrict ports (default: any)")
    methods: list[Literal["GET", "POST"]] = Field(default=["GET"], min_length=1)
    max_response_bytes: int = Field(default=1_000_000, gt=0, le=10_000_000)
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    max_redirects: int = Field(default=5, ge=0, le=10)
    requires_approval: bool = False

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for host in value:
            bare = host.removeprefix("*.")
            if not bare or "/" in bare or ":" in bare or "@" in bare or "*" in bare:
                raise ValueError(f"allowed_hosts entries are host names or '*.domain' patterns, got {host!r}")
        return [h.lower() for h in value]

    @field_validator("allowed_ports")
    @classmethod
    def _ports(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (not value or any(not 0 < p < 65536 for p in value)):
            raise ValueError("allowed_ports entries are ports between 1 and 65535")
        return value


class McpToolSpec(_Strict):
    """A remote MCP server (streamable HTTP) whose tools are offered to the model as ``<label>__<tool>``."""

    type: Literal["mcp"] = "mcp"
    server_label: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    server_url: str = Field(pattern=r"^https?://", max_length=2048)
    allowed_tools: list[str] | None = Field(default=None, description="expose only these tools (default: all)")
    headers: dict[str, str] = Field(
        default_factory=dict,
        max_length=32,
        description="sent on every request, e.g. Authorization; write-only: sealed when stored, shown as "
        "'<redacted>', and '<redacted>' sent back keeps the stored value (for the same server_url only)",
    )
    requires_approval: bool = False
    timeout_s: float = Field(default=30.0, gt=0, le=300)


class AgentToolSpec(_Strict):
    """Another agent of the tenant, called as a tool: it runs on a context of its own (the call's ``input`` as its
    user message, none of the caller's conversation) and its final answer is the tool's output."""

    type: Literal["agent"] = "agent"
    agent_id: str = Field(pattern=_AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")
    name: str | None = Field(
        default=None, pattern=_NAME_PATTERN, description="the tool's name (default: the agent's name in snake_case)"
    )
    description: str = Field(default="", max_length=1024)
    requires_approval: bool = False


ToolSpec = Annotated[
    FunctionToolSpec | CalculatorToolSpec | CurrentTimeToolSpec | HttpRequestToolSpec | McpToolSpec | AgentToolSpec,
    Field(discriminator="type"),
]


class HandoffSpec(_Strict):
    """An agent of the tenant the model may transfer the conversation to (a ``transfer_to_<name>`` tool call):
    the run goes on with that agent's instructions, tools and model, on the same messages."""

    agent_id: str = Field(pattern=_AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")
    description: str = Field(default="", max_length=1024, description="when the model should transfer")


class _Guardrail(_Strict):
    name: str | None = Field(default=None, pattern=_NAME_PATTERN, description="named in the error when it trips")


class RegexGuardrail(_Guardrail):
    """Trips when the text contains a match of ``pattern`` (Python ``re`` syntax; evaluation is bounded in time,
    and a pattern that takes longer trips it)."""

    type: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1, max_length=1000)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import regex  # type: ignore[import-untyped]

        try:
            regex.compile(value, flags=regex.VERSION0)
        except regex.error as exc:
            raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        return value


class JsonSchemaGuardrail(_Guardrail):
    """Trips unless the text is JSON valid against ``schema``."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    type: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any] = Field(alias="schema", description="a JSON Schema")

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if schema_nodes(value, past=MAX_TOOL_SCHEMA_NODES) > MAX_TOOL_SCHEMA_NODES:
            raise ValueError(f"schema has more than {MAX_TOOL_SCHEMA_NODES:,} nodes (JSON values, nested)")
        error = _schema_error(json.dumps(value, sort_keys=True))
        if error is not None:
            raise ValueError(f"schema is not a valid JSON Schema: {error}")
        return value


class MaxLengthGuardrail(_Guardrail):
    """Trips when the text is longer than ``max_chars`` characters."""

    type: Literal["max_length"] = "max_length"
    max_chars: int = Field(gt=0, le=10_000_000)


class AgentGuardrail(_Guardrail):
    """Another agent of the tenant judges the text (its user message): it answers a verdict
    ``{"allowed": bool, "reason": str}`` (asked as JSON of that schema), and trips the guardrail when not allowed or
    when its answer is no such verdict. Its model calls are the run's, billed to it."""

    type: Literal["agent"] = "agent"
    agent_id: str = Field(pattern=_AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")


GuardrailSpec = Annotated[
    RegexGuardrail | JsonSchemaGuardrail | MaxLengthGuardrail | AgentGuardrail, Field(discriminator="type")
]


class Guardrails(_Strict):
    """Checks on a run's input, before its first model call (a trip costs no compute), and on the final answer,
    before it is given (a trip replaces it). Either ends the run ``failed`` with ``guardrail_tripped``."""

    input: list[GuardrailSpec] = Field(default_factory=list, max_length=16)
    output: list[GuardrailSpec] = Field(default_factory=list, max_length=16)


class ModelParams(_Strict):
    """Sampling parameters passed to every model call of a run."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0, description="output tokens per model call")
    stop: list[str] | None = Field(default=None, max_length=4)
    seed: int | None = None


class RunLimits(_Strict):
    """When a run stops as ``incomplete``; every limit is checked before each model call."""

    max_steps: int = Field(default=25, gt=0, le=1000, description="model calls per run")
    max_tokens_per_run: int | None = Field(default=None, gt=0, description="input + output tokens of all calls")
    max_chip_seconds_per_run: float | None = Field(default=None, gt=0, description="accelerator chip-seconds")
    timeout_s: float = Field(default=600.0, gt=0, le=86_400, description="wall time from the run's start")
    max_handoffs: int = Field(default=10, ge=0, le=100, description="transfers between agents per run")
    requires_action_ttl_s: float = Field(
        default=600.0, gt=0, le=604_800, description="how long tool outputs may take (at most 7 days)"
    )


class AgentSpec(_Strict):
    """An agent version: name, instructions, model, tools, model parameters, limits and metadata."""

    name: str = Field(min_length=1, max_length=256)
    instructions: str = Field(default="", max_length=256_000)
    model: str = Field(min_length=1, max_length=256, description="a model name the accelerator pool serves")
    tools: list[ToolSpec] = Field(default_factory=list, max_length=128)
    handoffs: list[HandoffSpec] = Field(default_factory=list, max_length=32)
    guardrails: Guardrails = Field(default_factory=Guardrails)
    workflow: WorkflowSpec | None = Field(
        default=None, description="a graph of agents, decisions, loops and approvals the run follows instead"
    )
    model_params: ModelParams = Field(default_factory=ModelParams)
    limits: RunLimits = Field(default_factory=RunLimits)
    metadata: dict[str, str] = Field(default_factory=dict, max_length=16)

    @model_validator(mode="before")
    @classmethod
    def _bounded_tool_schemas(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        tools, guardrails = data.get("tools"), data.get("guardrails")
        schemas = (
            [tool.get("parameters") for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []
        )
        if isinstance(guardrails, dict):
            for checks in (guardrails.get("input"), guardrails.get("output")):
                if isinstance(checks, list):
                    schemas.extend(check.get("schema") for check in checks if isinstance(check, dict))
        if schema_nodes(schemas, past=MAX_TOOLS_SCHEMA_NODES + 1) > MAX_TOOLS_SCHEMA_NODES + 1:
            raise ValueError(
                f"the tools' parameters and the guardrails' schemas have more than {MAX_TOOLS_SCHEMA_NODES:,} "
                "nodes together (JSON values)"
            )
        return data

    @model_validator(mode="after")
    def _unique_tool_names(self) -> AgentSpec:
        seen: set[str] = set()
        labels: set[str] = set()
        for tool in self.tools:
            if isinstance(tool, McpToolSpec):
                if tool.server_label in labels:
                    raise ValueError(f"duplicate MCP server_label {tool.server_label!r}")
                labels.add(tool.server_label)
                continue
            if tool.name is None:
                continue  # an agent tool named after its agent: checked when its agent is known
            if tool.name in seen:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            seen.add(tool.name)
        targets = [h.agent_id for h in self.handoffs]
        if len(set(targets)) < len(targets):
            raise ValueError("handoffs name an agent more than once")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_metadata(value)
