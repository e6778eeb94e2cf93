"""The shapes of ``/v1/workflows``: a workflow as sent (``WorkflowSpec``) and as shown."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from switchyard.agents import AgentSpec
from switchyard.agents.workflows import StateVar, WorkflowNode, WorkflowSpec
from switchyard.platform.models import Agent, AgentVersion

__all__ = ["WorkflowCreate", "WorkflowDeleted", "WorkflowPublic", "WorkflowUpdate", "WorkflowVersionPublic"]


class WorkflowCreate(WorkflowSpec):
    """A new workflow; it becomes version 1. Nodes, state and expressions are those of
    ``switchyard.agents.workflows``; every agent a node names must be one of the tenant's."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class WorkflowUpdate(BaseModel):
    """Changes to a workflow; absent fields keep their value. The result is checked whole, as a new workflow is;
    any effective change makes a new immutable version (runs already started keep theirs)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = Field(default=None, min_length=1, max_length=256)
    description: str | None = Field(default=None, max_length=4096)
    start: str | None = None
    state: dict[str, StateVar] | None = None
    nodes: list[WorkflowNode] | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, str] | None = None


class _Shown(BaseModel):
    name: str
    description: str
    start: str
    state: dict[str, Any]
    nodes: list[dict[str, Any]]
    metadata: dict[str, str]

    @staticmethod
    def fields_of(version: AgentVersion) -> dict[str, Any]:
        graph = AgentSpec.model_validate(version.definition).workflow
        assert graph is not None  # a workflow's versions hold its graph
        return graph.model_dump(mode="json", by_alias=True)


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
