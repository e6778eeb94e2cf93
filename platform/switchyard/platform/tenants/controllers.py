from __future__ import annotations

from litestar import Controller, get, post
from litestar.params import FromPath, JSONBody

from switchyard.platform.auth import access, require_access
from switchyard.platform.deps import CurrentActor, DbSession, PageParams
from switchyard.platform.http.pagination import Page
from switchyard.platform.tenants import service
from switchyard.platform.tenants.schemas import TenantCreate, TenantCreated, TenantPublic

__all__ = ["TenantAdminController"]


class TenantAdminController(Controller):
    path = "/v1/admin/tenants"
    tags = ["Operator: tenants"]
    guards = [require_access]

    @post(opt=access("operator"), summary="Create a tenant")
    async def create_tenant(
        self, db_session: DbSession, actor: CurrentActor, data: JSONBody[TenantCreate]
    ) -> TenantCreated:
        """Create a tenant with its first owner; the response holds the owner's API key, shown once."""
        return await service.create_tenant(db_session, actor=actor, name=data.name, owner_email=data.owner_email)

    @get(opt=access("operator"), summary="List tenants")
    async def list_tenants(self, db_session: DbSession, page: PageParams) -> Page[TenantPublic]:
        """All tenants, newest first."""
        return await service.list_tenants(db_session, params=page)

    @get("/{tenant_id:str}", opt=access("operator"), summary="Get a tenant")
    async def get_tenant(self, db_session: DbSession, tenant_id: FromPath[str]) -> TenantPublic:
        """One tenant."""
        return await service.get_tenant(db_session, tenant_id=tenant_id)
