"""Bearer-key authentication at the edge: every route needs a valid key unless it opts out.

A verified key is noted for its ``last_used_at`` (``auth.last_use``): written after this, never on the request's path.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from sqlalchemy import select
from sqlmodel import col

from switchyard.platform.auth.key_cache import KeyCache
from switchyard.platform.auth.keys import parse_key, secret_matches
from switchyard.platform.auth.last_use import KeyUseRecorder
from switchyard.platform.auth.principal import Principal
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import UNSCOPED, TenantScope, scope_session
from switchyard.platform.http.errors import AuthenticationFailed
from switchyard.platform.models import ApiKey, OperatorKey, Tenant, utc_now

__all__ = ["ApiKeyAuthentication"]


class ApiKeyAuthentication(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: ASGIConnection[Any, Any, Any, Any]) -> AuthenticationResult:
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("missing API key: send `Authorization: Bearer <key>`")
        parsed = parse_key(token.strip())
        if parsed is None:
            raise AuthenticationFailed("malformed API key")
        cache: KeyCache = connection.app.state.key_cache
        cached = cache.get(parsed.short_id)
        if cached is not None:
            if not secret_matches(parsed.secret, cached.secret_sha256):
                raise AuthenticationFailed("invalid API key")
            if cached.expires_at is not None and cached.expires_at <= utc_now():
                raise AuthenticationFailed("API key has expired")
            return self._verified(connection, cached.principal)
        database = connection.app.state.database
        async with database.session() as session:
            scope_session(session, UNSCOPED)  # the key decides the tenant, so the lookup cannot be scoped
            table = OperatorKey if parsed.short_id.startswith("op") else ApiKey
            row = (
                await session.execute(select(table).where(col(table.short_id) == parsed.short_id))
            ).scalar_one_or_none()
            tenant = await session.get(Tenant, row.tenant_id) if isinstance(row, ApiKey) else None
        if row is None or not secret_matches(parsed.secret, row.secret_sha256):
            raise AuthenticationFailed("invalid API key")
        if row.revoked_at is not None:
            raise AuthenticationFailed("API key has been revoked")
        if row.expires_at is not None and row.expires_at <= utc_now():
            raise AuthenticationFailed("API key has expired")
        if tenant is not None and tenant.suspended_at is not None:  # within the key cache's lifetime, as a revocation
            raise AuthenticationFailed("the API key's tenant is suspended: ask the platform's operator")
        if isinstance(row, ApiKey):
            principal = Principal(key_id=row.id, scope=TenantScope(row.tenant_id), role=Role(row.role))
        else:
            principal = Principal(key_id=row.id, scope=None, role=None)
        cache.put(parsed.short_id, principal, row.secret_sha256, row.expires_at)
        return self._verified(connection, principal)

    @staticmethod
    def _verified(connection: ASGIConnection[Any, Any, Any, Any], principal: Principal) -> AuthenticationResult:
        key_uses: KeyUseRecorder = connection.app.state.key_uses
        key_uses.note(principal)
        return AuthenticationResult(user=principal, auth=principal)
