"""Bearer-key authentication at the edge: every route needs a valid key unless it opts out.

A verified key is noted for its ``last_used_at`` (``auth.last_use``): written after this, never on the request's path.
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from switchyard.platform.auth.key_cache import KeyCache
from switchyard.platform.auth.keys import parse_key, secret_matches
from switchyard.platform.auth.last_use import KeyUseRecorder
from switchyard.platform.auth.principal import Principal
from switchyard.platform.http.errors import AuthenticationFailed
from switchyard.platform.http.server_timing import mark_stage
from switchyard.platform.models import utc_now

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
        record = await cache.get(parsed.short_id)
        if record is None or not secret_matches(parsed.secret, record.secret_sha256):
            raise AuthenticationFailed("invalid API key")
        if record.revoked:
            raise AuthenticationFailed("API key has been revoked")
        if record.expires_at is not None and record.expires_at <= utc_now():
            raise AuthenticationFailed("API key has expired")
        if record.tenant_suspended:  # within the key cache's lifetime, as a revocation
            raise AuthenticationFailed("the API key's tenant is suspended: ask the platform's operator")
        return self._verified(connection, record.principal)

    @staticmethod
    def _verified(connection: ASGIConnection[Any, Any, Any, Any], principal: Principal) -> AuthenticationResult:
        key_uses: KeyUseRecorder = connection.app.state.key_uses
        key_uses.note(principal)
        mark_stage("auth")
        return AuthenticationResult(user=principal, auth=principal)
