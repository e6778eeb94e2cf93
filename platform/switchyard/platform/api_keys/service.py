"""API keys of a tenant: issue (the secret shown once), list, revoke."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.api_keys.schemas import ApiKeyCreated, ApiKeyPublic
from switchyard.platform.audit.service import record
from switchyard.platform.auth.key_cache import KeyCache
from switchyard.platform.auth.keys import issue_key
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import InvalidRequest, NotFound, PermissionDenied
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.models import ApiKey, utc_now

__all__ = ["create_key", "get_key", "list_keys", "revoke_key"]


async def create_key(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    actor_role: Role,
    role: Role,
    name: str = "",
    expires_at: datetime | None = None,
) -> ApiKeyCreated:
    if not actor_role.includes(role):
        raise PermissionDenied(f"a {actor_role.value} key cannot create a {role.value} key", param="role")
    if expires_at is not None and expires_at <= utc_now():
        raise InvalidRequest("expires_at must be in the future", param="expires_at", code="invalid_value")
    issued = issue_key()
    row = ApiKey(
        id=new_id("key"),
        tenant_id=scope.tenant_id,
        name=name,
        short_id=issued.short_id,
        secret_sha256=issued.secret_sha256,
        role=role.value,
        expires_at=expires_at,
    )
    session.add(row)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="api_key.create",
        target_type="api_key",
        target_id=row.id,
        details={"role": role.value, "name": name},
    )
    await session.flush()
    return ApiKeyCreated(**ApiKeyPublic.of(row).model_dump(), value=issued.plaintext)


async def get_key(session: AsyncSession, *, scope: TenantScope, key_id: str) -> ApiKeyPublic:
    """One of the tenant's keys (revoked ones too); ``NotFound`` for another tenant's or an unknown id."""
    return ApiKeyPublic.of(await _find_key(session, scope, key_id))


async def _find_key(session: AsyncSession, scope: TenantScope, key_id: str) -> ApiKey:
    row = (
        await session.execute(select(ApiKey).where(col(ApiKey.tenant_id) == scope.tenant_id, col(ApiKey.id) == key_id))
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no API key {key_id!r}", param="key_id")
    return row


async def list_keys(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[ApiKeyPublic]:
    statement = select(ApiKey).where(col(ApiKey.tenant_id) == scope.tenant_id)
    return await paginate(session, statement, col(ApiKey.id), params, ApiKeyPublic.of)


async def revoke_key(
    session: AsyncSession,
    *,
    scope: TenantScope,
    actor: Actor,
    actor_role: Role,
    key_id: str,
    key_cache: KeyCache | None = None,
) -> ApiKeyPublic:
    """Revoke a key; effective on the next request. Revoking an already revoked key changes nothing."""
    row = await _find_key(session, scope, key_id)
    if not actor_role.includes(Role(row.role)):
        raise PermissionDenied(f"a {actor_role.value} key cannot revoke a {row.role} key")
    if row.revoked_at is None:
        row.revoked_at = utc_now()
        record(
            session,
            tenant_id=scope.tenant_id,
            actor=actor,
            action="api_key.revoke",
            target_type="api_key",
            target_id=row.id,
        )
        await session.flush()
    if key_cache is not None:
        key_cache.forget(row.short_id)
    return ApiKeyPublic.of(row)
