"""The shapes of ``/v1/workflows``: a workflow as sent (``WorkflowSpec``) and as shown."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchyard.agents import AgentSpec
from switchyard.agents.shapes import MAX_TOOLS_SCHEMA_NODES
from switchyard.agents.sizes import schema_nodes
from switchyard.agents.spec import (
    CalculatorToolSpec,
    CurrentTimeToolSpec,
    FileSearchToolSpec,
    FunctionToolSpec,
    HttpRequestToolSpec,
    McpToolSpec,
)
from switchyard.agents.tools.secrets import redact_tool_secrets
from switchyard.agents.workflows import StateVar, WorkflowNode, WorkflowSpec
from switchyard.platform.models import Agent, AgentVersion

__all__ = [
    "WorkflowCreate",
    "WorkflowDeleted",
    "WorkflowPublic",
    "WorkflowTool",
    "WorkflowUpdate",
    "WorkflowVersionPublic",
]

WorkflowTool = Annotated[
    FunctionToolSpec
    | CalculatorToolSpec
    | CurrentTimeToolSpec
    | HttpRequestToolSpec
    | McpToolSpec
    | FileSearchToolSpec,
    Field(discriminator="type"),
]
"""A tool a workflow's ``function``, ``mcp`` and ``file_search`` nodes call (an agent's tool shapes; another agent is
an agent node)."""


def _bounded_schemas(data: Any) -> Any:
    """``data`` if its tools' parameters and its guardrail nodes' schemas are within the bound together (counted
    before any is checked against JSON Schema's metaschema, CPU on the event loop every tenant shares)."""
    if not isinstance(data, dict):
        return data
    tools, nodes = data.get("tools"), data.get("nodes")
    schemas: list[Any] = [t.get("parameters") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    for node in nodes if isinstance(nodes, list) else []:
        checks = node.get("guardrails") if isinstance(node, dict) else None
        schemas.extend(check.get("schema") for check in checks or [] if isinstance(check, dict))
    if schema_nodes(schemas, past=MAX_TOOLS_SCHEMA_NODES + 1) > MAX_TOOLS_SCHEMA_NODES + 1:
        raise ValueError(
            f"the tools' parameters and the guardrail nodes' schemas have more than {MAX_TOOLS_SCHEMA_NODES:,} "
            "nodes together (JSON values)"
        )
    return data


class WorkflowCreate(WorkflowSpec):
    """A new workflow; it becomes version 1. Nodes, state and expressions are those of
    ``switchyard.agents.workflows``; every agent a node names must be one of the tenant's, every tool a ``function``
    or ``mcp`` node calls one of ``tools``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    tools: list[WorkflowTool] = Field(
        default_factory=list,
        max_length=128,
        description="the tools its function and mcp nodes call; an MCP server's headers are write-only, as an agent's",
    )

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return _bounded_schemas(data)

    def graph(self) -> WorkflowSpec:
        """The workflow's graph (all but its tools)."""
        return WorkflowSpec.model_validate(self.model_dump(mode="json", by_alias=True, exclude={"tools"}))


class WorkflowUpdate(BaseModel):
    """Changes to a workflow; absent fields keep their value. The result is checked whole, as a new workflow is;
    any effective change makes a new immutable version (runs already started keep theirs)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = Field(default=None, min_length=1, max_length=256)
    description: str | None = Field(default=None, max_length=4096)
    start: str | None = None
    state: dict[str, StateVar] | None = None
    nodes: list[WorkflowNode] | None = Field(default=None, min_length=1, max_length=200)
    tools: list[WorkflowTool] | None = Field(default=None, max_length=128)
    metadata: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return _bounded_schemas(data)


class _Shown(BaseModel):
    name: str
    description: str
    start: str
    state: dict[str, Any]
    nodes: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    metadata: dict[str, str]

    @staticmethod
    def fields_of(version: AgentVersion) -> dict[str, Any]:
        spec = AgentSpec.model_validate(version.definition)
        assert spec.workflow is not None  # a workflow's versions hold its graph
        tools = redact_tool_secrets(spec.model_dump(mode="json"))["tools"]  # an MCP header shows as <redacted>
        return {**spec.workflow.model_dump(mode="json", by_alias=True), "tools": tools}


class WorkflowPublic(_Shown):
    """A workflow as its latest version defines it."""

    object: Literal["workflow"] = "workflow"
    id: str
    version: int = Field(description="The latest version; new runs use it unless they name another.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Agent, version: AgentVersion) -> WorkflowPublic:
        shown = cls.fields_of(version)
        return cls(id=row.id, version=version.version, created_at=row.created_at, updated_at=row.updated_at, **shown)


class WorkflowVersionPublic(_Shown):
    """One immutable version of a workflow."""

    object: Literal["workflow.version"] = "workflow.version"
    id: str
    workflow_id: str
    version: int
    created_at: datetime

    @classmethod
    def of(cls, row: AgentVersion) -> WorkflowVersionPublic:
        shown = cls.fields_of(row)
        return cls(id=row.id, workflow_id=row.agent_id, version=row.version, created_at=row.created_at, **shown)


class WorkflowDeleted(BaseModel):
    object: Literal["workflow.deleted"] = "workflow.deleted"
    id: str
    deleted: bool = True
