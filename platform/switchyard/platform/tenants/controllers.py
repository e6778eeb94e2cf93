from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, post
from litestar.params import FromPath, JSONBody

from switchyard.platform.auth import access, require_access
from switchyard.platform.deps import CurrentActor, DbSession, PageParams
from switchyard.platform.http.pagination import Page
from switchyard.platform.settings import Settings
from switchyard.platform.tenants import service
from switchyard.platform.tenants.schemas import TenantCreate, TenantCreated, TenantPublic

__all__ = ["TenantAdminController"]


class TenantAdminController(Controller):
    path = "/v1/admin/tenants"
    tags = ["Operator: tenants"]
    guards = [require_access]

    @post(opt=access("operator"), summary="Create a tenant")
    async def create_tenant(
        self, request: Request[Any, Any, Any], db_session: DbSession, actor: CurrentActor, data: JSONBody[TenantCreate]
    ) -> TenantCreated:
        """Create a tenant with its first owner; the response holds the owner's API key and the owner's one-time
        console invitation link (on `SWITCHYARD_PUBLIC_URL`), both shown once."""
        settings: Settings = request.app.state.settings
        return await service.create_tenant(
            db_session,
            actor=actor,
            name=data.name,
            owner_email=data.owner_email,
            invitation_base_url=settings.public_url,
        )

    @get(opt=access("operator"), summary="List tenants")
    async def list_tenants(self, db_session: DbSession, page: PageParams) -> Page[TenantPublic]:
        """All tenants, newest first."""
        return await service.list_tenants(db_session, params=page)

    @get("/{tenant_id:str}", opt=access("operator"), summary="Get a tenant")
    async def get_tenant(self, db_session: DbSession, tenant_id: FromPath[str]) -> TenantPublic:
        """One tenant."""
        return await service.get_tenant(db_session, tenant_id=tenant_id)

    @post("/{tenant_id:str}/suspend", opt=access("operator"), status_code=200, summary="Suspend a tenant")
    async def suspend_tenant(
        self, db_session: DbSession, actor: CurrentActor, tenant_id: FromPath[str]
    ) -> TenantPublic:
        """Refuse the tenant's API keys and end its members' console access until it is reactivated; its data is
        kept. Suspending a suspended tenant changes nothing."""
        return await service.set_suspended(db_session, actor=actor, tenant_id=tenant_id, suspended=True)

    @post("/{tenant_id:str}/reactivate", opt=access("operator"), status_code=200, summary="Reactivate a tenant")
    async def reactivate_tenant(
        self, db_session: DbSession, actor: CurrentActor, tenant_id: FromPath[str]
    ) -> TenantPublic:
        """Let a suspended tenant's keys and members in again."""
        return await service.set_suspended(db_session, actor=actor, tenant_id=tenant_id, suspended=False)
