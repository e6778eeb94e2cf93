"""Dependencies shared by the controllers: the caller, their tenant, and the request's unit of work."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from litestar import Request
from litestar.di import NamedDependency, Provide
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.auth.principal import Actor, Principal
from switchyard.platform.db import UNSCOPED, Database, TenantScope, scope_session
from switchyard.platform.http.errors import PermissionDenied
from switchyard.platform.http.pagination import CursorParams, cursor_params
from switchyard.platform.http.request_id import request_id_of
from switchyard.platform.settings import Settings

__all__ = ["CurrentActor", "CurrentPrincipal", "CurrentTenant", "DbSession", "PageParams", "dependencies"]

DbSession = NamedDependency[AsyncSession]
"""The request's unit of work (``db_session``)."""
CurrentPrincipal = NamedDependency[Principal]
"""The verified key making the request (``principal``)."""
CurrentTenant = NamedDependency[TenantScope]
"""The caller's tenant (``tenant``); only tenant keys have one."""
CurrentActor = NamedDependency[Actor]
"""Who to name in the audit log (``actor``)."""
PageParams = NamedDependency[CursorParams]
"""Cursor pagination parameters (``page``)."""


async def provide_db_session(request: Request[Any, Any, Any]) -> AsyncGenerator[AsyncSession, None]:
    """One unit of work per request: scoped to the caller's tenant, committed once after the handler."""
    database: Database = request.app.state.database
    principal: Principal | None = request.scope.get("user")
    async with database.session() as session:
        scope_session(session, principal.scope if principal and principal.scope else UNSCOPED)
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    principal: Principal = request.user
    return principal


def provide_tenant_scope(principal: CurrentPrincipal) -> TenantScope:
    if principal.scope is None:
        raise PermissionDenied("this operation needs a tenant API key")
    return principal.scope


def provide_actor(request: Request[Any, Any, Any], principal: CurrentPrincipal) -> Actor:
    return Actor(key_id=principal.key_id, request_id=request_id_of(request.scope))


def provide_settings(request: Request[Any, Any, Any]) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def dependencies() -> dict[str, Any]:
    return {
        "db_session": Provide(provide_db_session),
        "principal": Provide(provide_principal, sync_to_thread=False),
        "tenant": Provide(provide_tenant_scope, sync_to_thread=False),
        "actor": Provide(provide_actor, sync_to_thread=False),
        "settings": Provide(provide_settings, sync_to_thread=False),
        "page": Provide(cursor_params, sync_to_thread=False),
    }
