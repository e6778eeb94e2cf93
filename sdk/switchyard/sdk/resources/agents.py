"""Agents: definitions (instructions, model, tools, limits), versioned on every change."""

from __future__ import annotations

from typing import Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import Agent, AgentVersion, Deleted
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import AgentCreateParams, AgentUpdateParams, ListParams
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = ["Agents", "AsyncAgents"]


def _path(agent_id: str, tail: str = "") -> str:
    return f"/agents/{segment(agent_id)}{tail}"


class Agents(SyncResource):
    def create(self, *, idempotency_key: str | None = None, **params: Unpack[AgentCreateParams]) -> Agent:
        """Create an agent; it starts at version 1."""
        return self._client.request(Call("POST", "/agents", body=params, idempotency_key=idempotency_key), Agent)

    def retrieve(self, agent_id: str) -> Agent:
        return self._client.request(Call("GET", _path(agent_id)), Agent)

    def update(self, agent_id: str, **params: Unpack[AgentUpdateParams]) -> Agent:
        """Change the given fields (the others stay); the agent gets a new version."""
        return self._client.request(Call("PATCH", _path(agent_id), body=params), Agent)

    def delete(self, agent_id: str) -> Deleted:
        return self._client.request(Call("DELETE", _path(agent_id)), Deleted)

    def list(self, **params: Unpack[ListParams]) -> Page[Agent]:
        return self._client.page(Call("GET", "/agents", params=params), Agent)

    def versions(self, agent_id: str, **params: Unpack[ListParams]) -> Page[AgentVersion]:
        """Every version of the agent, each immutable."""
        return self._client.page(Call("GET", _path(agent_id, "/versions"), params=params), AgentVersion)


class AsyncAgents(AsyncResource):
    async def create(self, *, idempotency_key: str | None = None, **params: Unpack[AgentCreateParams]) -> Agent:
        call = Call("POST", "/agents", body=params, idempotency_key=idempotency_key)
        return await self._client.request(call, Agent)

    async def retrieve(self, agent_id: str) -> Agent:
        return await self._client.request(Call("GET", _path(agent_id)), Agent)

    async def update(self, agent_id: str, **params: Unpack[AgentUpdateParams]) -> Agent:
        return await self._client.request(Call("PATCH", _path(agent_id), body=params), Agent)

    async def delete(self, agent_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", _path(agent_id)), Deleted)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Agent]:
        return await self._client.page(Call("GET", "/agents", params=params), Agent)

    async def versions(self, agent_id: str, **params: Unpack[ListParams]) -> AsyncPage[AgentVersion]:
        return await self._client.page(Call("GET", _path(agent_id, "/versions"), params=params), AgentVersion)
