"""The tenant's own account: served models, API keys, members and the audit log."""

from __future__ import annotations

from typing import Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import ApiKey, ApiKeyCreated, AuditEvent, Deleted, Member, Model
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import ApiKeyCreateParams, ListParams, Role
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = [
    "ApiKeys",
    "AsyncApiKeys",
    "AsyncAuditLog",
    "AsyncMembers",
    "AsyncModels",
    "AuditLog",
    "Members",
    "Models",
]


def _audit(action: str | None, params: ListParams) -> Call:
    return Call("GET", "/audit-log", params={**params, "action": action})


class Models(SyncResource):
    def list(self) -> list[Model]:
        """The models this tenant may call, with their backend and instance type."""
        return [Model.model_validate(row) for row in self._client.json(Call("GET", "/models"))["data"]]

    def retrieve(self, model_id: str) -> Model:
        return self._client.request(Call("GET", f"/models/{model_id}"), Model)


class ApiKeys(SyncResource):
    def create(self, **params: Unpack[ApiKeyCreateParams]) -> ApiKeyCreated:
        """A new key of the tenant; its ``value`` is shown this once."""
        return self._client.request(Call("POST", "/api-keys", body=params), ApiKeyCreated)

    def list(self, **params: Unpack[ListParams]) -> Page[ApiKey]:
        return self._client.page(Call("GET", "/api-keys", params=params), ApiKey)

    def revoke(self, key_id: str) -> ApiKey:
        return self._client.request(Call("DELETE", f"/api-keys/{segment(key_id)}"), ApiKey)


class Members(SyncResource):
    def create(self, *, email: str, role: Role = "developer") -> Member:
        return self._client.request(Call("POST", "/members", body={"email": email, "role": role}), Member)

    def retrieve(self, member_id: str) -> Member:
        return self._client.request(Call("GET", f"/members/{segment(member_id)}"), Member)

    def update(self, member_id: str, *, role: Role) -> Member:
        return self._client.request(Call("PATCH", f"/members/{segment(member_id)}", body={"role": role}), Member)

    def delete(self, member_id: str) -> Deleted:
        return self._client.request(Call("DELETE", f"/members/{segment(member_id)}"), Deleted)

    def list(self, **params: Unpack[ListParams]) -> Page[Member]:
        return self._client.page(Call("GET", "/members", params=params), Member)


class AuditLog(SyncResource):
    def list(self, *, action: str | None = None, **params: Unpack[ListParams]) -> Page[AuditEvent]:
        """Every change to the tenant, newest last (``order="desc"`` for newest first); ``action`` filters."""
        return self._client.page(_audit(action, params), AuditEvent)


class AsyncModels(AsyncResource):
    async def list(self) -> list[Model]:
        return [Model.model_validate(row) for row in (await self._client.json(Call("GET", "/models")))["data"]]

    async def retrieve(self, model_id: str) -> Model:
        return await self._client.request(Call("GET", f"/models/{model_id}"), Model)


class AsyncApiKeys(AsyncResource):
    async def create(self, **params: Unpack[ApiKeyCreateParams]) -> ApiKeyCreated:
        return await self._client.request(Call("POST", "/api-keys", body=params), ApiKeyCreated)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[ApiKey]:
        return await self._client.page(Call("GET", "/api-keys", params=params), ApiKey)

    async def revoke(self, key_id: str) -> ApiKey:
        return await self._client.request(Call("DELETE", f"/api-keys/{segment(key_id)}"), ApiKey)


class AsyncMembers(AsyncResource):
    async def create(self, *, email: str, role: Role = "developer") -> Member:
        return await self._client.request(Call("POST", "/members", body={"email": email, "role": role}), Member)

    async def retrieve(self, member_id: str) -> Member:
        return await self._client.request(Call("GET", f"/members/{segment(member_id)}"), Member)

    async def update(self, member_id: str, *, role: Role) -> Member:
        call = Call("PATCH", f"/members/{segment(member_id)}", body={"role": role})
        return await self._client.request(call, Member)

    async def delete(self, member_id: str) -> Deleted:
        return await self._client.request(Call("DELETE", f"/members/{segment(member_id)}"), Deleted)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Member]:
        return await self._client.page(Call("GET", "/members", params=params), Member)


class AsyncAuditLog(AsyncResource):
    async def list(self, *, action: str | None = None, **params: Unpack[ListParams]) -> AsyncPage[AuditEvent]:
        return await self._client.page(_audit(action, params), AuditEvent)
