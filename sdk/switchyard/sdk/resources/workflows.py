"""Workflows: graphs of agents, decisions, bounded loops and approvals, versioned on every change. A workflow runs
as an agent does: ``threads.runs.create(thread_id, agent_id=workflow.id)``."""

from __future__ import annotations

from typing import Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import Deleted, Workflow, WorkflowVersion
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import ListParams, WorkflowCreateParams, WorkflowUpdateParams
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = ["AsyncWorkflows", "Workflows"]


def _path(workflow_id: str, tail: str = "") -> str:
    return f"/workflows/{segment(workflow_id)}{tail}"


class Workflows(SyncResource):
    def create(self, *, idempotency_key: str | None = None, **params: Unpack[WorkflowCreateParams]) -> Workflow:
        """Create a workflow (checked whole); it starts at version 1."""
        call = Call("POST", "/workflows", body=params, idempotency_key=idempotency_key)
        return self._client.request(call, Workflow)

    def retrieve(self, workflow_id: str) -> Workflow:
        return self._client.request(Call("GET", _path(workflow_id)), Workflow)

    def update(self, workflow_id: str, **params: Unpack[WorkflowUpdateParams]) -> Workflow:
        """Change the given fields (the others stay); the workflow gets a new version."""
        return self._client.request(Call("PATCH", _path(workflow_id), body=params), Workflow)

    def delete(self, workflow_id: str) -> Deleted:
        return self._client.request(Call("DELETE", _path(workflow_id)), Deleted)

    def list(self, **params: Unpack[ListParams]) -> Page[Workflow]:
        return self._client.page(Call("GET", "/workflows", params=params), Workflow)

    def versions(self, workflow_id: str, **params: Unpack[ListParams]) -> Page[WorkflowVersion]:
        """Every version of the workflow, each immutable."""
        return self._client.page(Call("GET", _path(workflow_id, "/versions"), params=params), WorkflowVersion)


class AsyncWorkflows(AsyncResource):
    async def create(self, *, idempotency_key: str | None = None, **params: Unpack[WorkflowCreateParams]) -> Workflow:
        call = Call("POST", "/workflows", body=params, idempotency_key=idempotency_key)
        return await self._client.request(call, Workflow)

    async def retrieve(self, workflow_id: str) -> Workflow:
        return await self._client.request(Call("GET", _path(workflow_id)), Workflow)

    async def update(self, workflow_id: str, **params: Unpack[WorkflowUpdateParams]) -> Workflow:
        return await self._client.request(Call("PATCH", _path(workflow_id), body=params), Workflow)

    async def delete(self, workflow_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", _path(workflow_id)), Deleted)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Workflow]:
        return await self._client.page(Call("GET", "/workflows", params=params), Workflow)

    async def versions(self, workflow_id: str, **params: Unpack[ListParams]) -> AsyncPage[WorkflowVersion]:
        return await self._client.page(Call("GET", _path(workflow_id, "/versions"), params=params), WorkflowVersion)
