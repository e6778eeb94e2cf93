from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK

from switchyard.platform.api_keys import service
from switchyard.platform.api_keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic
from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentActor, CurrentPrincipal, CurrentTenant, DbSession, PageParams
from switchyard.platform.http.pagination import Page

__all__ = ["ApiKeyController"]


class ApiKeyController(Controller):
    path = "/v1/api-keys"
    tags = ["API keys"]
    guards = [require_access]

    @post(opt=access(Role.ADMIN), summary="Create an API key")
    async def create_api_key(
        self,
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        principal: CurrentPrincipal,
        data: JSONBody[ApiKeyCreate],
    ) -> ApiKeyCreated:
        """Issue a key for the caller's tenant. The response holds the secret value; it is not shown again."""
        return await service.create_key(
            db_session,
            scope=tenant,
            actor=actor,
            actor_role=principal.tenant_role,
            role=data.role,
            name=data.name,
            expires_at=data.expires_at,
        )

    @get(opt=access(Role.ADMIN), summary="List API keys")
    async def list_api_keys(self, db_session: DbSession, tenant: CurrentTenant, page: PageParams) -> Page[ApiKeyPublic]:
        """The tenant's keys, newest first, without their secrets."""
        return await service.list_keys(db_session, scope=tenant, params=page)

    @delete("/{key_id:str}", opt=access(Role.ADMIN), status_code=HTTP_200_OK, summary="Revoke an API key")
    async def revoke_api_key(
        self,
        request: Request[Any, Any, Any],
        db_session: DbSession,
        tenant: CurrentTenant,
        actor: CurrentActor,
        principal: CurrentPrincipal,
        key_id: FromPath[str],
    ) -> ApiKeyPublic:
        """Revoke a key; requests with it fail with 401 from now on."""
        return await service.revoke_key(
            db_session,
            scope=tenant,
            actor=actor,
            actor_role=principal.tenant_role,
            key_id=key_id,
            key_cache=request.app.state.key_cache,
        )
