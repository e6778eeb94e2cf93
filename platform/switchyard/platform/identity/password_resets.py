"""Password-reset links: a member who forgot their password chooses a new one by following a one-time link.

An admin or owner issues a link for a member on the Members page (:func:`issue_reset`, the role rules of
managing members: nobody resets a role above their own), or the member asks for one by e-mail on the sign-in
page (:func:`issue_self_resets`, only with ``SWITCHYARD_SMTP_URL``). Like an invitation, only the secret's SHA-256
is stored; a link works once (``used_at``) until it expires, and a member has one live link at a time (a new one
replaces the older). Using it (:func:`use_reset`) ends the member's console sessions, so whoever knew the old
password is signed out. Each step is in the tenant's audit log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import NotFound, PermissionDenied
from switchyard.platform.identity.links import LinkNotValid, absolute, new_secret, redeemable
from switchyard.platform.identity.passwords import set_password
from switchyard.platform.identity.sessions import end_member_sessions, find_sign_in_candidates
from switchyard.platform.models import Member, MemberPasswordReset, Tenant, utc_now

__all__ = [
    "ADMIN_RESET_LIFETIME",
    "RESET_PATH",
    "SELF_RESET_LIFETIME",
    "IssuedReset",
    "PendingReset",
    "ResetNotValid",
    "SelfReset",
    "find_reset",
    "issue_reset",
    "issue_self_resets",
    "reset_link",
    "use_reset",
]

ADMIN_RESET_LIFETIME = timedelta(hours=24)  # passed on by hand, like an invitation: a day to reach the member
SELF_RESET_LIFETIME = timedelta(hours=1)  # mailed to the member, who is waiting for it
RESET_PATH = "/console/password-reset/"  # the console's page that takes a link (console.pages.password_reset)


class ResetNotValid(LinkNotValid):
    """A reset link that cannot be used: its ``reason`` says why (unknown, used or expired)."""


@dataclass(frozen=True, slots=True)
class PendingReset:
    """A usable reset link's member."""

    id: str
    member_id: str
    email: str
    tenant_id: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class IssuedReset:
    """A new reset link's secret (shown or mailed once, never stored)."""

    reset: PendingReset
    secret: str


@dataclass(frozen=True, slots=True)
class SelfReset:
    """A reset link a member asked for, with the name of the tenant it is for (to say so in the mail)."""

    tenant_name: str
    issued: IssuedReset


def reset_link(base_url: str, secret: str) -> str:
    """The absolute address of a reset link on the console served at ``base_url``."""
    return absolute(base_url, RESET_PATH, secret)


async def _issue(session: AsyncSession, *, member: Member, actor: Actor, lifetime: timedelta) -> IssuedReset:
    await session.execute(  # one live link per member: the older ones stop working
        delete(MemberPasswordReset).where(
            col(MemberPasswordReset.tenant_id) == member.tenant_id, col(MemberPasswordReset.member_id) == member.id
        )
    )
    secret, digest = new_secret()
    now = utc_now()
    row = MemberPasswordReset(
        id=new_id("pwr"),
        tenant_id=member.tenant_id,
        token_sha256=digest,
        member_id=member.id,
        issued_by=actor.key_id[:40],
        created_at=now,
        expires_at=now + lifetime,
    )
    session.add(row)
    await session.flush()
    record(
        session,
        tenant_id=member.tenant_id,
        actor=actor,
        action="member.password_reset_issue",
        target_type="member",
        target_id=member.id,
        details={"reset_id": row.id, "expires_at": row.expires_at.isoformat()},
    )
    pending = PendingReset(row.id, member.id, member.email, member.tenant_id, row.expires_at)
    return IssuedReset(pending, secret)


async def issue_reset(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, member_id: str
) -> IssuedReset:
    """A reset link for a member of the tenant, issued by an admin or owner (not for a role above their own)."""
    member = (
        await session.execute(
            select(Member).where(col(Member.tenant_id) == scope.tenant_id, col(Member.id) == member_id)
        )
    ).scalar_one_or_none()
    if member is None:
        raise NotFound(f"no member {member_id!r}", param="member_id")
    if not actor_role.includes(Role(member.role)):
        raise PermissionDenied(f"a {actor_role.value} cannot reset the password of a {member.role}", param="role")
    return await _issue(session, member=member, actor=actor, lifetime=ADMIN_RESET_LIFETIME)


async def issue_self_resets(session: AsyncSession, *, email: str, request_id: str | None) -> list[SelfReset]:
    """A reset link for each membership of ``email`` (its oldest ten), which its owner asked for by e-mail (an
    unscoped session: the address decides the tenants). Empty for an address that is no member's."""
    issued = []
    for member, _ in await find_sign_in_candidates(session, email):
        tenant = await session.get(Tenant, member.tenant_id)
        actor = Actor(key_id=member.id, request_id=request_id)
        reset = await _issue(session, member=member, actor=actor, lifetime=SELF_RESET_LIFETIME)
        issued.append(SelfReset(tenant.name if tenant else member.tenant_id, reset))
    return issued


async def find_reset(session: AsyncSession, secret: str) -> PendingReset:
    """The usable reset a link's secret names (an unscoped session); raises ``ResetNotValid``."""
    reset, member = await redeemable(
        session, MemberPasswordReset, secret, used=lambda row: row.used_at, error=ResetNotValid
    )
    return PendingReset(reset.id, member.id, member.email, member.tenant_id, reset.expires_at)


async def use_reset(session: AsyncSession, *, secret: str, password: str, actor: Actor) -> Member:
    """Use a link (once): the member's password becomes ``password`` (the caller checked its rules), every
    session of the member ends (``member.password_reset``), and the member is returned to be signed in. Two uses
    at once: one wins, the other gets ``USED``."""
    pending = await find_reset(session, secret)
    now = utc_now()
    result = await session.execute(
        update(MemberPasswordReset)
        .where(
            col(MemberPasswordReset.id) == pending.id,
            col(MemberPasswordReset.used_at).is_(None),
            col(MemberPasswordReset.expires_at) > now,
        )
        .values(used_at=now)
    )
    if not isinstance(result, CursorResult) or result.rowcount != 1:
        raise ResetNotValid(ResetNotValid.Reason.USED)
    scope = TenantScope(pending.tenant_id)
    await set_password(session, scope=scope, member_id=pending.member_id, password=password)
    await end_member_sessions(session, scope=scope, member_id=pending.member_id)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.password_reset",
        target_type="member",
        target_id=pending.member_id,
        details={"reset_id": pending.id},
    )
    member = (
        await session.execute(
            select(Member).where(col(Member.tenant_id) == scope.tenant_id, col(Member.id) == pending.member_id)
        )
    ).scalar_one()
    return member
