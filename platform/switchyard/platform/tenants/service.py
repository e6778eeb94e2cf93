"""Tenants (operator-managed) and operator keys."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.api_keys.service import create_key
from switchyard.platform.audit.service import record, record_operator
from switchyard.platform.auth.keys import issue_key
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import NotFound
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.identity.invitations import invitation_link, invite_first_owner
from switchyard.platform.models import Member, OperatorKey, Tenant, utc_now
from switchyard.platform.tenants.schemas import TenantCreated, TenantPublic

__all__ = [
    "create_operator_key",
    "create_tenant",
    "get_tenant",
    "list_operator_keys",
    "list_tenants",
    "placeholder_owner_email",
    "revoke_operator_key",
    "set_suspended",
]


def placeholder_owner_email(tenant_id: str) -> str:
    """The first owner's address when none is given: one a browser's e-mail field accepts (no ``_`` in the
    domain), in the reserved ``.invalid`` domain so no mail is ever sent to it."""
    return f"owner-{tenant_id}@switchyard.invalid".lower()


async def create_tenant(
    session: AsyncSession,
    *,
    actor: Actor,
    name: str,
    owner_email: str | None,
    invitation_base_url: str | None = None,
) -> TenantCreated:
    """A tenant, its first owner member and an owner API key (an operator action: unscoped session); with
    ``invitation_base_url`` (``SWITCHYARD_PUBLIC_URL``), also the owner's invitation link to the console."""
    tenant = Tenant(id=new_id("ten"), name=name)
    session.add(tenant)
    await session.flush()
    scope = TenantScope(tenant.id)
    email = (owner_email or placeholder_owner_email(tenant.id)).lower()
    session.add(Member(id=new_id("mem"), tenant_id=tenant.id, email=email, role=Role.OWNER.value))
    record(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="tenant.create",
        target_type="tenant",
        target_id=tenant.id,
        details={"name": name, "owner_email": email},
        by_operator=True,
    )
    key = await create_key(session, scope=scope, actor=actor, actor_role=Role.OWNER, role=Role.OWNER, name="owner")
    created = TenantCreated(**TenantPublic.of(tenant).model_dump(), owner_key=key, owner_email=email)
    if invitation_base_url is None:
        return created
    issued = await invite_first_owner(session, tenant_id=tenant.id, actor=actor)
    return created.model_copy(
        update={
            "owner_invitation_url": invitation_link(invitation_base_url, issued.secret),
            "owner_invitation_expires_at": issued.invitation.expires_at,
        }
    )


async def list_tenants(session: AsyncSession, *, params: CursorParams) -> Page[TenantPublic]:
    return await paginate(session, select(Tenant), col(Tenant.id), params, TenantPublic.of)


async def get_tenant(session: AsyncSession, *, tenant_id: str) -> TenantPublic:
    row = await session.get(Tenant, tenant_id)
    if row is None:
        raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
    return TenantPublic.of(row)


async def set_suspended(session: AsyncSession, *, actor: Actor, tenant_id: str, suspended: bool) -> TenantPublic:
    """Suspend a tenant (its API keys and its members' console sessions stop working) or reactivate it; recorded
    in the tenant's and the operator audit logs (``tenant.suspend``, ``tenant.reactivate``). Asking for the state
    the tenant is already in changes nothing and records nothing."""
    row = await session.get(Tenant, tenant_id)
    if row is None:
        raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
    if (row.suspended_at is not None) != suspended:
        row.suspended_at = utc_now() if suspended else None
        record(
            session,
            tenant_id=row.id,
            actor=actor,
            action="tenant.suspend" if suspended else "tenant.reactivate",
            target_type="tenant",
            target_id=row.id,
            details={"name": row.name},
            by_operator=True,
        )
        await session.flush()
    return TenantPublic.of(row)


async def create_operator_key(session: AsyncSession, *, actor: Actor, name: str) -> str:
    """A new operator key, recorded in the operator audit log; returns its plaintext, which is not stored."""
    issued = issue_key(kind="op")
    key = OperatorKey(id=new_id("opk"), name=name, short_id=issued.short_id, secret_sha256=issued.secret_sha256)
    session.add(key)
    record_operator(
        session,
        actor=actor,
        action="operator_key.create",
        target_type="operator_key",
        target_id=key.id,
        details={"name": name, "short_id": issued.short_id},
    )
    await session.flush()
    return issued.plaintext


async def list_operator_keys(session: AsyncSession) -> list[OperatorKey]:
    """Every operator key, revoked ones included, oldest first."""
    rows = await session.execute(select(OperatorKey).order_by(col(OperatorKey.created_at), col(OperatorKey.id)))
    return list(rows.scalars())


async def revoke_operator_key(session: AsyncSession, *, actor: Actor, key_id: str) -> OperatorKey:
    """Revoke an operator key (effective within ``SWITCHYARD_AUTH_CACHE_SECONDS``); a revoked key stays revoked."""
    row = await session.get(OperatorKey, key_id)
    if row is None:
        raise NotFound(f"no operator key {key_id!r}", param="key_id")
    if row.revoked_at is None:
        row.revoked_at = utc_now()
        record_operator(
            session,
            actor=actor,
            action="operator_key.revoke",
            target_type="operator_key",
            target_id=row.id,
            details={"name": row.name, "short_id": row.short_id},
        )
        await session.flush()
    return row
