"""The agent specification: what a tenant defines and every run of a version uses."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from switchyard.agents.guardrails import (
    AgentGuardrail,
    Guardrails,
    GuardrailSpec,
    JsonSchemaGuardrail,
    MaxLengthGuardrail,
    RegexGuardrail,
)
from switchyard.agents.shapes import (
    AGENT_ID_PATTERN,
    MAX_TOOL_SCHEMA_NODES,
    MAX_TOOLS_SCHEMA_NODES,
    NAME_PATTERN,
    Strict,
    checked_schema,
)
from switchyard.agents.sizes import checked_metadata, schema_nodes
from switchyard.agents.workflows.spec import FileSearchNode, FunctionNode, McpNode, WorkflowSpec

__all__ = [
    "MAX_TOOLS_SCHEMA_NODES",
    "MAX_TOOL_SCHEMA_NODES",
    "AgentGuardrail",
    "AgentSpec",
    "AgentToolSpec",
    "CalculatorToolSpec",
    "CurrentTimeToolSpec",
    "FileSearchToolSpec",
    "FunctionToolSpec",
    "GuardrailSpec",
    "Guardrails",
    "HandoffSpec",
    "HttpRequestToolSpec",
    "JsonSchemaGuardrail",
    "MaxLengthGuardrail",
    "McpToolSpec",
    "ModelParams",
    "OutputSchema",
    "RegexGuardrail",
    "RunLimits",
    "ToolSpec",
]


class FunctionToolSpec(Strict):
    """A tool the client executes; the run stops in ``requires_action`` until its outputs arrive."""

    type: Literal["function"] = "function"
    name: str = Field(pattern=NAME_PATTERN, description="unique within the agent")
    description: str = Field(default="", max_length=1024)
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments (an object schema)",
    )
    requires_approval: bool = Field(default=False, description="a human approves each call first")

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return checked_schema(value, "parameters", an_object=True)


class CalculatorToolSpec(Strict):
    """The built-in safe arithmetic tool."""

    type: Literal["calculator"] = "calculator"
    name: str = Field(default="calculator", pattern=NAME_PATTERN)
    requires_approval: bool = False


class CurrentTimeToolSpec(Strict):
    """The built-in clock tool."""

    type: Literal["current_time"] = "current_time"
    name: str = Field(default="current_time", pattern=NAME_PATTERN)
    requires_approval: bool = False


class HttpRequestToolSpec(Strict):
    """The built-in HTTP tool, restricted to allow-listed hosts and guarded against SSRF."""

    type: Literal["http_request"] = "http_request"
    name: str = Field(default="http_request", pattern=NAME_PATTERN)
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


class McpToolSpec(Strict):
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


class FileSearchToolSpec(Strict):
    """Search the tenant's vector stores (OpenAI's hosted ``file_search``): the model asks with a query and reads
    the best chunks; they are retrieved on the worker, the query's embedding billed as an embedding call."""

    type: Literal["file_search"] = "file_search"
    vector_store_ids: list[str] = Field(min_length=1, max_length=16)
    max_num_results: int = Field(default=10, ge=1, le=50)
    filters: dict[str, Any] | None = Field(default=None, description="OpenAI's comparison or compound filter")
    ranking_options: dict[str, Any] | None = Field(default=None, description="{ranker, score_threshold}")

    @field_validator("vector_store_ids")
    @classmethod
    def _store_ids(cls, value: list[str]) -> list[str]:
        for store in value:
            if not 0 < len(store) <= 64 or not store.isascii():
                raise ValueError("vector_store_ids are ids of the tenant's vector stores")
        return value

    @field_validator("filters")
    @classmethod
    def _bounded_filters(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and schema_nodes(value, past=1_000) > 1_000:
            raise ValueError("filters has more than 1,000 JSON values")
        return value

    @property
    def name(self) -> str:
        """The tool's name for the model (one ``file_search`` tool an agent)."""
        return "file_search"

    @property
    def score_threshold(self) -> float:
        threshold = (self.ranking_options or {}).get("score_threshold", 0.0)
        return float(threshold) if isinstance(threshold, int | float) and not isinstance(threshold, bool) else 0.0


class AgentToolSpec(Strict):
    """Another agent of the tenant, called as a tool: it runs on a context of its own (the call's ``input`` as its
    user message, none of the caller's conversation) and its final answer is the tool's output."""

    type: Literal["agent"] = "agent"
    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")
    name: str | None = Field(
        default=None, pattern=NAME_PATTERN, description="the tool's name (default: the agent's name in snake_case)"
    )
    description: str = Field(default="", max_length=1024)
    requires_approval: bool = False


ToolSpec = Annotated[
    FunctionToolSpec
    | CalculatorToolSpec
    | CurrentTimeToolSpec
    | HttpRequestToolSpec
    | McpToolSpec
    | FileSearchToolSpec
    | AgentToolSpec,
    Field(discriminator="type"),
]


class HandoffSpec(Strict):
    """An agent of the tenant the model may transfer the conversation to (a ``transfer_to_<name>`` tool call):
    the run goes on with that agent's instructions, tools and model, on the same messages."""

    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    version: int | None = Field(default=None, gt=0, description="a version of the agent (default: its latest)")
    description: str = Field(default="", max_length=1024, description="when the model should transfer")


class OutputSchema(Strict):
    """The agent's answers as JSON valid against ``schema`` (OpenAI's ``json_schema`` response format): every model
    call of the agent asks for it, tool calls still allowed."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    name: str = Field(default="answer", pattern=NAME_PATTERN, description="the format's name, as models see it")
    json_schema: dict[str, Any] = Field(alias="schema", description="JSON Schema of the answer (an object schema)")
    strict: bool = Field(default=True, description="the answer follows the schema exactly")

    @field_validator("json_schema")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return checked_schema(value, "schema", an_object=True)

    def response_format(self) -> dict[str, Any]:
        """The chat completions ``response_format`` of the agent's model calls."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.json_schema, "strict": self.strict},
        }


class ModelParams(Strict):
    """Sampling parameters passed to every model call of a run."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0, description="output tokens per model call")
    stop: list[str] | None = Field(default=None, max_length=4)
    seed: int | None = None
    ignore_eos: bool | None = Field(
        default=None,
        description="vLLM's extension: each answer's text runs to max_tokens instead of stopping on its own "
        "(fixed-length calls, as benchmarks use)",
    )


class RunLimits(Strict):
    """When a run stops as ``incomplete``; every limit is checked before each model call."""

    max_steps: int = Field(default=25, gt=0, le=1000, description="model calls per run")
    max_tokens_per_run: int | None = Field(default=None, gt=0, description="input + output tokens of all calls")
    max_chip_seconds_per_run: float | None = Field(default=None, gt=0, description="accelerator chip-seconds")
    timeout_s: float = Field(default=600.0, gt=0, le=86_400, description="wall time from the run's start")
    max_handoffs: int = Field(default=10, ge=0, le=100, description="transfers between agents per run")
    requires_action_ttl_s: float = Field(
        default=600.0, gt=0, le=604_800, description="how long tool outputs may take (at most 7 days)"
    )


class AgentSpec(Strict):
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
    output_schema: OutputSchema | None = Field(default=None, description="answers as JSON of this schema")
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

    @model_validator(mode="after")
    def _workflow_tools(self) -> AgentSpec:
        """A workflow's tool nodes call its own tools: a function node one named so, an MCP node one its server
        may offer."""
        if self.workflow is None:
            return self
        named = {t.name for t in self.tools if not isinstance(t, McpToolSpec | AgentToolSpec)}
        servers = {t.server_label: t for t in self.tools if isinstance(t, McpToolSpec)}
        for node in self.workflow.tool_calls():
            if isinstance(node, McpNode):
                server = servers.get(node.server_label)
                if server is None:
                    raise ValueError(
                        f"node {node.id!r}: server_label {node.server_label!r} is no MCP tool of the workflow"
                    )
                if server.allowed_tools is not None and node.tool not in server.allowed_tools:
                    raise ValueError(
                        f"node {node.id!r}: tool {node.tool!r} is not in the allowed_tools of {node.server_label!r}"
                    )
            elif isinstance(node, FileSearchNode) and "file_search" not in named:
                raise ValueError(f"node {node.id!r}: the workflow has no file_search tool (its vector stores)")
            elif isinstance(node, FunctionNode) and node.tool not in named:
                raise ValueError(f"node {node.id!r}: tool {node.tool!r} is not one of the workflow's tools")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_metadata(value)
