from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from switchyard.agents import AgentSpec, Guardrails, HandoffSpec, ModelParams, OutputSchema, RunLimits, ToolSpec
from switchyard.agents.tools.secrets import redact_tool_secrets
from switchyard.platform.http.bodies import REQUEST_BODY
from switchyard.platform.models import Agent, AgentVersion

__all__ = ["AgentCreate", "AgentDeleted", "AgentPublic", "AgentUpdate", "AgentVersionPublic"]


class AgentCreate(AgentSpec):
    """A new agent; it becomes version 1. Tools, parameters and limits are those of ``switchyard.agents``."""

    model_config = REQUEST_BODY

    name: str = Field(min_length=1, max_length=256, examples=["support-bot"], description="A label for people.")
    model: str = Field(
        min_length=1,
        max_length=256,
        examples=["meta-llama/Llama-3.1-8B-Instruct"],
        description="A model the tenant may use (see `GET /v1/models`).",
    )


# A field that may be left out (it keeps its value) but not set to null (it has no default to reset to).
_Name = Annotated[str | None, WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 256})]


class AgentUpdate(BaseModel):
    """Changes to an agent; absent fields keep their value, `null` resets a field to its default.

    Any effective change creates a new immutable version; runs already started keep theirs.
    """

    model_config = REQUEST_BODY

    name: _Name = Field(default=None, min_length=1, max_length=256)
    instructions: str | None = Field(default=None, max_length=256_000)
    model: _Name = Field(default=None, min_length=1, max_length=256)
    tools: list[ToolSpec] | None = Field(default=None, max_length=128)
    handoffs: list[HandoffSpec] | None = Field(default=None, max_length=32)
    guardrails: Guardrails | None = None
    model_params: ModelParams | None = None
    output_schema: OutputSchema | None = None
    limits: RunLimits | None = None
    metadata: dict[str, str] | None = None


class _Definition(BaseModel):
    name: str
    instructions: str
    model: str
    tools: list[dict[str, Any]]
    handoffs: list[dict[str, Any]]
    guardrails: dict[str, Any]
    model_params: dict[str, Any]
    output_schema: dict[str, Any] | None = Field(
        description="The answers' JSON Schema (`name`, `schema`, `strict`); null: answers are text."
    )
    limits: dict[str, Any]
    metadata: dict[str, str]


def _definition(definition: dict[str, Any]) -> dict[str, Any]:
    """A stored definition as every role reads it: an MCP header's value shows as ``<redacted>``, never sealed or
    in clear (send it back as ``<redacted>`` to keep it)."""
    spec = redact_tool_secrets(AgentSpec.model_validate(definition).model_dump(mode="json"))
    return {key: spec[key] for key in _Definition.model_fields}


class AgentPublic(_Definition):
    """An agent as its latest version defines it."""

    object: Literal["agent"] = "agent"
    id: str
    version: int = Field(description="The latest version; new runs use it unless they name another.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, agent: Agent, version: AgentVersion) -> AgentPublic:
        return cls(
            id=agent.id,
            version=version.version,
            created_at=agent.created_at,
            updated_at=agent.updated_at,
            **_definition(version.definition),
        )


class AgentVersionPublic(_Definition):
    """One immutable version of an agent."""

    object: Literal["agent.version"] = "agent.version"
    id: str
    agent_id: str
    version: int
    created_at: datetime

    @classmethod
    def of(cls, row: AgentVersion) -> AgentVersionPublic:
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            version=row.version,
            created_at=row.created_at,
            **_definition(row.definition),
        )


class AgentDeleted(BaseModel):
    object: Literal["agent.deleted"] = "agent.deleted"
    id: str
    deleted: bool = True
