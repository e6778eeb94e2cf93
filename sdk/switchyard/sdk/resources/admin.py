"""Operator routes: tenants, rate cards, credits, the fleet and the operator audit log (operator keys only)."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Unpack

from switchyard.sdk.base_client import Call
from switchyard.sdk.models import AuditEvent, Credit, RateCard, Tenant, TenantCreated
from switchyard.sdk.pagination import AsyncPage, Page
from switchyard.sdk.params import CreditGrantParams, ListParams, RateCardCreateParams, TenantCreateParams
from switchyard.sdk.resources.base import AsyncResource, SyncResource, segment

__all__ = ["Admin", "AsyncAdmin"]


def _credits(tenant_id: str) -> str:
    return f"/admin/tenants/{segment(tenant_id)}/credits"


def _audit(action: str | None, params: ListParams) -> Call:
    return Call("GET", "/admin/audit-log", params={**params, "action": action})


class Tenants(SyncResource):
    def create(self, **params: Unpack[TenantCreateParams]) -> TenantCreated:
        """A tenant with its first owner and an owner key (``owner_key.value``, shown this once)."""
        return self._client.request(Call("POST", "/admin/tenants", body=params), TenantCreated)

    def retrieve(self, tenant_id: str) -> Tenant:
        return self._client.request(Call("GET", f"/admin/tenants/{segment(tenant_id)}"), Tenant)

    def list(self, **params: Unpack[ListParams]) -> Page[Tenant]:
        return self._client.page(Call("GET", "/admin/tenants", params=params), Tenant)


class Admin(SyncResource):
    @cached_property
    def tenants(self) -> Tenants:
        return Tenants(self._client)

    def create_rate_card(self, **params: Unpack[RateCardCreateParams]) -> RateCard:
        """A new rate card version, in force from ``effective_from`` (default: now)."""
        return self._client.request(Call("POST", "/admin/rate-cards", body=params), RateCard)

    def list_rate_cards(self, *, instance_type: str | None = None, **params: Unpack[ListParams]) -> Page[RateCard]:
        return self._client.page(
            Call("GET", "/admin/rate-cards", params={**params, "instance_type": instance_type}), RateCard
        )

    def grant_credit(self, tenant_id: str, **params: Unpack[CreditGrantParams]) -> Credit:
        """A credit, applied once as a negative line of the tenant's next finalized invoice."""
        return self._client.request(Call("POST", _credits(tenant_id), body=params), Credit)

    def list_credits(self, tenant_id: str) -> list[Credit]:
        return [Credit.model_validate(row) for row in self._client.json(Call("GET", _credits(tenant_id)))]

    def fleet(self) -> dict[str, Any]:
        """Deployments with their replicas, utilisation, queue depth and KV-cache use."""
        return dict(self._client.json(Call("GET", "/admin/fleet")))

    def reload_fleet(self) -> dict[str, Any]:
        """Re-read the fleet file; a bad file is refused and changes nothing."""
        return dict(self._client.json(Call("POST", "/admin/fleet/reload")))

    def audit_log(self, *, action: str | None = None, **params: Unpack[ListParams]) -> Page[AuditEvent]:
        """Every operator action, platform-wide."""
        return self._client.page(_audit(action, params), AuditEvent)


class AsyncTenants(AsyncResource):
    async def create(self, **params: Unpack[TenantCreateParams]) -> TenantCreated:
        return await self._client.request(Call("POST", "/admin/tenants", body=params), TenantCreated)

    async def retrieve(self, tenant_id: str) -> Tenant:
        return await self._client.request(Call("GET", f"/admin/tenants/{segment(tenant_id)}"), Tenant)

    async def list(self, **params: Unpack[ListParams]) -> AsyncPage[Tenant]:
        return await self._client.page(Call("GET", "/admin/tenants", params=params), Tenant)


class AsyncAdmin(AsyncResource):
    @cached_property
    def tenants(self) -> AsyncTenants:
        return AsyncTenants(self._client)

    async def create_rate_card(self, **params: Unpack[RateCardCreateParams]) -> RateCard:
        return await self._client.request(Call("POST", "/admin/rate-cards", body=params), RateCard)

    async def list_rate_cards(
        self, *, instance_type: str | None = None, **params: Unpack[ListParams]
    ) -> AsyncPage[RateCard]:
        call = Call("GET", "/admin/rate-cards", params={**params, "instance_type": instance_type})
        return await self._client.page(call, RateCard)

    async def grant_credit(self, tenant_id: str, **params: Unpack[CreditGrantParams]) -> Credit:
        return await self._client.request(Call("POST", _credits(tenant_id), body=params), Credit)

    async def list_credits(self, tenant_id: str) -> list[Credit]:
        return [Credit.model_validate(row) for row in await self._client.json(Call("GET", _credits(tenant_id)))]

    async def fleet(self) -> dict[str, Any]:
        return dict(await self._client.json(Call("GET", "/admin/fleet")))

    async def reload_fleet(self) -> dict[str, Any]:
        return dict(await self._client.json(Call("POST", "/admin/fleet/reload")))

    async def audit_log(self, *, action: str | None = None, **params: Unpack[ListParams]) -> AsyncPage[AuditEvent]:
        return await self._client.page(_audit(action, params), AuditEvent)
