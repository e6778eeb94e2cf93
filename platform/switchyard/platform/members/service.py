"""Members of a tenant and their roles; a tenant always keeps at least one owner."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import Conflict, NotFound, PermissionDenied
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.members.schemas import MemberPublic
from switchyard.platform.models import Member

__all__ = ["add_member", "change_role", "get_member", "list_members", "remove_member"]


async def _find(session: AsyncSession, scope: TenantScope, member_id: str) -> Member:
    row = (
        await session.execute(
            select(Member).where(col(Member.tenant_id) == scope.tenant_id, col(Member.id) == member_id)
        )
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no member {member_id!r}", param="member_id")
    return row


async def _owner_count(session: AsyncSession, scope: TenantScope) -> int:
    statement = select(func.count()).where(
        col(Member.tenant_id) == scope.tenant_id, col(Member.role) == Role.OWNER.value
    )
    return int((await session.execute(statement)).scalar_one())


def _may_manage(actor_role: Role, role: Role) -> None:
    if not actor_role.includes(role):
        raise PermissionDenied(f"a {actor_role.value} key cannot manage {role.value} members", param="role")


async def add_member(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, email: str, role: Role
) -> MemberPublic:
    _may_manage(actor_role, role)
    email = email.strip().lower()
    taken = await session.execute(
        select(col(Member.id)).where(col(Member.tenant_id) == scope.tenant_id, col(Member.email) == email)
    )
    if taken.first() is not None:
        raise Conflict(f"{email} is already a member", param="email", code="member_exists")
    row = Member(id=new_id("mem"), tenant_id=scope.tenant_id, email=email, role=role.value)
    session.add(row)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.create",
        target_type="member",
        target_id=row.id,
        details={"email": email, "role": role.value},
    )
    await session.flush()
    return MemberPublic.of(row)


async def list_members(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[MemberPublic]:
    statement = select(Member).where(col(Member.tenant_id) == scope.tenant_id)
    return await paginate(session, statement, col(Member.id), params, MemberPublic.of)


async def get_member(session: AsyncSession, *, scope: TenantScope, member_id: str) -> MemberPublic:
    return MemberPublic.of(await _find(session, scope, member_id))


async def change_role(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, member_id: str, role: Role
) -> MemberPublic:
    row = await _find(session, scope, member_id)
    _may_manage(actor_role, Role(row.role))
    _may_manage(actor_role, role)
    if row.role == Role.OWNER and role != Role.OWNER and await _owner_count(session, scope) <= 1:
        raise Conflict("a tenant must keep at least one owner", param="role", code="last_owner")
    if row.role != role.value:
        record(
            session,
            tenant_id=scope.tenant_id,
            actor=actor,
            action="member.update",
            target_type="member",
            target_id=row.id,
            details={"from": row.role, "to": role.value},
        )
        row.role = role.value
        await session.flush()
    return MemberPublic.of(row)


async def remove_member(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, member_id: str
) -> str:
    row = await _find(session, scope, member_id)
    _may_manage(actor_role, Role(row.role))
    if row.role == Role.OWNER and await _owner_count(session, scope) <= 1:
        raise Conflict("a tenant must keep at least one owner", param="member_id", code="last_owner")
    await session.delete(row)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.delete",
        target_type="member",
        target_id=row.id,
        details={"email": row.email},
    )
    await session.flush()
    return row.id
