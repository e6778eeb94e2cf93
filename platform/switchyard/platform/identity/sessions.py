"""Server-side console sessions: a random cookie secret whose SHA-256 finds the session row.

A session belongs to one member of one tenant and acts with that member's *current* role (read on every
request, so a role change or removal takes effect at once). It ends at sign-out, after ``SESSION_LIFETIME``,
or after ``IDLE_TIMEOUT`` without a request. Sessions are no API credential: the API reads bearer keys only.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.auth.roles import Role
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.models import ConsoleSession, Member, MemberPassword, OperatorConsoleSession, Tenant, utc_now

__all__ = [
    "IDLE_TIMEOUT",
    "SESSION_LIFETIME",
    "TOUCH_AFTER",
    "ConsoleUser",
    "end_member_sessions",
    "end_session",
    "find_sign_in_candidates",
    "live_session",
    "password_hash_of",
    "resolve_session",
    "start_session",
    "token_sha256",
]

SESSION_LIFETIME = timedelta(hours=12)
IDLE_TIMEOUT = timedelta(hours=1)
TOUCH_AFTER = timedelta(minutes=1)  # last_seen_at is written at most once a minute per session
MAX_MEMBERSHIPS_TRIED = 10  # an email in more tenants than this signs in to its oldest ten only


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """The signed-in member behind a console request."""

    session_id: str
    member_id: str
    email: str
    role: Role
    scope: TenantScope
    tenant_name: str
    csrf_token: str


def token_sha256(token: str) -> str:
    """The only form of a cookie's secret that is stored (member and operator sessions alike)."""
    return hashlib.sha256(token.encode()).hexdigest()


def live_session(
    table: type[ConsoleSession] | type[OperatorConsoleSession], token: str, now: datetime
) -> list[ColumnElement[bool]]:
    """The conditions of the live session that ``token`` names: not ended, not expired, not idle too long."""
    return [
        col(table.token_sha256) == token_sha256(token),
        col(table.ended_at).is_(None),
        col(table.expires_at) > now,
        col(table.last_seen_at) > now - IDLE_TIMEOUT,
    ]


async def find_sign_in_candidates(session: AsyncSession, email: str) -> list[tuple[Member, str | None]]:
    """The memberships of ``email`` (oldest first) with their password hash, if any (an unscoped session); a
    suspended tenant's are not among them."""
    statement = (
        select(Member, col(MemberPassword.password_hash))
        .outerjoin(MemberPassword, col(MemberPassword.member_id) == col(Member.id))
        .join(Tenant, col(Tenant.id) == col(Member.tenant_id))
        .where(col(Member.email) == email.strip().lower(), col(Tenant.suspended_at).is_(None))
        .order_by(col(Member.created_at), col(Member.id))
        .limit(MAX_MEMBERSHIPS_TRIED)
    )
    return [(member, password_hash) for member, password_hash in (await session.execute(statement)).all()]


async def start_session(session: AsyncSession, *, member: Member) -> tuple[str, ConsoleSession]:
    """A new session for ``member``; returns the cookie's secret (never stored) and the row."""
    token = secrets.token_urlsafe(32)
    now = utc_now()
    row = ConsoleSession(
        id=new_id("cse"),
        tenant_id=member.tenant_id,
        token_sha256=token_sha256(token),
        member_id=member.id,
        csrf_token=secrets.token_urlsafe(32),
        created_at=now,
        last_seen_at=now,
        expires_at=now + SESSION_LIFETIME,
    )
    session.add(row)
    await session.flush()
    return token, row


async def resolve_session(session: AsyncSession, token: str) -> ConsoleUser | None:
    """The live session the cookie names, or ``None`` (unknown, ended, expired, idle too long, or its tenant is
    suspended)."""
    if not token or len(token) > 128:
        return None
    now = utc_now()
    statement = (
        select(ConsoleSession, Member, Tenant)
        .join(Member, col(Member.id) == col(ConsoleSession.member_id))
        .join(Tenant, col(Tenant.id) == col(ConsoleSession.tenant_id))
        .where(*live_session(ConsoleSession, token, now), col(Tenant.suspended_at).is_(None))
    )
    found = (await session.execute(statement)).first()
    if found is None:
        return None
    row, member, tenant = found
    if row.last_seen_at < now - TOUCH_AFTER:
        await session.execute(update(ConsoleSession).where(col(ConsoleSession.id) == row.id).values(last_seen_at=now))
    return ConsoleUser(
        session_id=row.id,
        member_id=member.id,
        email=member.email,
        role=Role(member.role),
        scope=TenantScope(row.tenant_id),
        tenant_name=tenant.name,
        csrf_token=row.csrf_token,
    )


async def end_session(session: AsyncSession, *, scope: TenantScope, session_id: str) -> None:
    await session.execute(
        update(ConsoleSession)
        .where(
            col(ConsoleSession.tenant_id) == scope.tenant_id,
            col(ConsoleSession.id) == session_id,
            col(ConsoleSession.ended_at).is_(None),
        )
        .values(ended_at=utc_now())
    )


async def end_member_sessions(session: AsyncSession, *, scope: TenantScope, member_id: str) -> None:
    """End every live session of a member (their password was reset: whoever knew the old one is signed out)."""
    await session.execute(
        update(ConsoleSession)
        .where(
            col(ConsoleSession.tenant_id) == scope.tenant_id,
            col(ConsoleSession.member_id) == member_id,
            col(ConsoleSession.ended_at).is_(None),
        )
        .values(ended_at=utc_now())
    )


async def password_hash_of(session: AsyncSession, *, scope: TenantScope, member_id: str) -> str | None:
    statement = select(col(MemberPassword.password_hash)).where(
        col(MemberPassword.tenant_id) == scope.tenant_id, col(MemberPassword.member_id) == member_id
    )
    return (await session.execute(statement)).scalar_one_or_none()
