"""Invitation links: a new member joins by following a link that lets them set their own password once.

Inviting adds the member (``service.add_member``, with its role rules) and an invitation whose secret is in the
link: only its SHA-256 is stored, so the link is shown to the inviter once and cannot be shown again. A link
works once (``accepted_at``), for ``INVITATION_LIFETIME``; inviting the member again replaces it (the old link
stops working), and revoking it removes the member who never joined. Every step is in the tenant's audit log.

A tenant made through the API or the CLI gets such a link for its first owner (``invite_first_owner``), the only
way that owner can choose a console password; the link's address is :func:`invitation_link`'s.
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
from switchyard.platform.members import service
from switchyard.platform.models import Member, MemberInvitation, utc_now

__all__ = [
    "INVITATION_LIFETIME",
    "InvitationNotValid",
    "IssuedInvitation",
    "PendingInvitation",
    "accept_invitation",
    "find_invitation",
    "invitation_link",
    "invite_first_owner",
    "invite_member",
    "list_pending",
    "reissue_invitation",
    "revoke_invitation",
]

INVITATION_LIFETIME = timedelta(days=7)
INVITATION_PATH = "/console/invitations/"  # the console's page that accepts a link (console.pages.invitations)


class InvitationNotValid(LinkNotValid):
    """An invitation link that cannot be used: its ``reason`` says why (unknown, used or expired)."""


@dataclass(frozen=True, slots=True)
class PendingInvitation:
    """An invitation not accepted yet, with the member it invites."""

    id: str
    member_id: str
    email: str
    role: Role
    tenant_id: str
    created_at: datetime
    expires_at: datetime

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now


@dataclass(frozen=True, slots=True)
class IssuedInvitation:
    """A new invitation and the secret of its link (shown once, never stored)."""

    invitation: PendingInvitation
    secret: str


def invitation_link(base_url: str, secret: str) -> str:
    """The absolute address of an invitation's link on the console served at ``base_url``."""
    return absolute(base_url, INVITATION_PATH, secret)


def _pending(invitation: MemberInvitation, member: Member) -> PendingInvitation:
    return PendingInvitation(
        id=invitation.id,
        member_id=member.id,
        email=member.email,
        role=Role(member.role),
        tenant_id=invitation.tenant_id,
        created_at=invitation.created_at,
        expires_at=invitation.expires_at,
    )


async def _issue(session: AsyncSession, *, scope: TenantScope, actor: Actor, member: Member) -> IssuedInvitation:
    secret, digest = new_secret()
    now = utc_now()
    row = MemberInvitation(
        id=new_id("inv"),
        tenant_id=scope.tenant_id,
        token_sha256=digest,
        member_id=member.id,
        invited_by=actor.key_id,
        created_at=now,
        expires_at=now + INVITATION_LIFETIME,
    )
    session.add(row)
    await session.flush()
    return IssuedInvitation(_pending(row, member), secret)


async def _member(session: AsyncSession, scope: TenantScope, member_id: str) -> Member:
    row = (
        await session.execute(
            select(Member).where(col(Member.tenant_id) == scope.tenant_id, col(Member.id) == member_id)
        )
    ).scalar_one()
    return row


async def invite_member(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, email: str, role: Role
) -> IssuedInvitation:
    """Add a member (``member.create``) with an invitation link (``member.invite``)."""
    added = await service.add_member(session, scope=scope, actor=actor, actor_role=actor_role, email=email, role=role)
    issued = await _issue(session, scope=scope, actor=actor, member=await _member(session, scope, added.id))
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.invite",
        target_type="member",
        target_id=added.id,
        details={"invitation_id": issued.invitation.id, "expires_at": issued.invitation.expires_at.isoformat()},
    )
    return issued


async def invite_first_owner(session: AsyncSession, *, tenant_id: str, actor: Actor) -> IssuedInvitation:
    """An invitation link for a new tenant's first owner (``member.invite``), who has no password yet."""
    scope = TenantScope(tenant_id)
    owner = (
        await session.execute(
            select(Member)
            .where(col(Member.tenant_id) == tenant_id, col(Member.role) == Role.OWNER.value)
            .order_by(col(Member.created_at), col(Member.id))
            .limit(1)
        )
    ).scalar_one()
    issued = await _issue(session, scope=scope, actor=actor, member=owner)
    record(
        session,
        tenant_id=tenant_id,
        actor=actor,
        action="member.invite",
        target_type="member",
        target_id=owner.id,
        details={"invitation_id": issued.invitation.id, "expires_at": issued.invitation.expires_at.isoformat()},
    )
    return issued


async def list_pending(session: AsyncSession, *, scope: TenantScope) -> list[PendingInvitation]:
    """The tenant's invitations not accepted yet (expired ones included), newest first."""
    statement = (
        select(MemberInvitation, Member)
        .join(Member, col(Member.id) == col(MemberInvitation.member_id))
        .where(col(MemberInvitation.tenant_id) == scope.tenant_id, col(MemberInvitation.accepted_at).is_(None))
        .order_by(col(MemberInvitation.created_at).desc(), col(MemberInvitation.id).desc())
    )
    return [_pending(invitation, member) for invitation, member in (await session.execute(statement)).all()]


async def _find_pending(
    session: AsyncSession, scope: TenantScope, invitation_id: str, actor_role: Role
) -> tuple[MemberInvitation, Member]:
    found = (
        await session.execute(
            select(MemberInvitation, Member)
            .join(Member, col(Member.id) == col(MemberInvitation.member_id))
            .where(
                col(MemberInvitation.tenant_id) == scope.tenant_id,
                col(MemberInvitation.id) == invitation_id,
                col(MemberInvitation.accepted_at).is_(None),
            )
        )
    ).first()
    if found is None:
        raise NotFound(f"no pending invitation {invitation_id!r}", param="invitation_id")
    invitation, member = found
    if not actor_role.includes(Role(member.role)):
        raise PermissionDenied(f"a {actor_role.value} cannot manage {member.role} members", param="role")
    return invitation, member


async def reissue_invitation(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, invitation_id: str
) -> IssuedInvitation:
    """A new link for a pending invitation (``member.reinvite``); the old link stops working."""
    old, member = await _find_pending(session, scope, invitation_id, actor_role)
    await session.execute(delete(MemberInvitation).where(col(MemberInvitation.id) == old.id))
    issued = await _issue(session, scope=scope, actor=actor, member=member)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.reinvite",
        target_type="member",
        target_id=member.id,
        details={"invitation_id": issued.invitation.id, "replaces": old.id},
    )
    return issued


async def revoke_invitation(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, actor_role: Role, invitation_id: str
) -> str:
    """Withdraw a pending invitation: the member who never joined is removed (``member.invite_revoke``, then
    ``member.delete`` by the members service's rules); returns the member's id."""
    invitation, member = await _find_pending(session, scope, invitation_id, actor_role)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.invite_revoke",
        target_type="member",
        target_id=member.id,
        details={"invitation_id": invitation.id, "email": member.email},
    )
    return await service.remove_member(session, scope=scope, actor=actor, actor_role=actor_role, member_id=member.id)


async def find_invitation(session: AsyncSession, secret: str) -> PendingInvitation:
    """The usable invitation a link's secret names (an unscoped session: the link decides the tenant).

    Raises ``InvitationNotValid`` for an unknown, used or expired link.
    """
    invitation, member = await redeemable(
        session, MemberInvitation, secret, used=lambda row: row.accepted_at, error=InvitationNotValid
    )
    return _pending(invitation, member)


async def accept_invitation(session: AsyncSession, *, secret: str, actor: Actor) -> Member:
    """Use a link (once): marks it accepted (``member.invite_accept``) and returns the member, whose password the
    caller sets in the same unit of work. Two acceptances at once: one wins, the other gets ``USED``."""
    pending = await find_invitation(session, secret)
    now = utc_now()
    result = await session.execute(
        update(MemberInvitation)
        .where(
            col(MemberInvitation.id) == pending.id,
            col(MemberInvitation.accepted_at).is_(None),
            col(MemberInvitation.expires_at) > now,
        )
        .values(accepted_at=now)
    )
    if not isinstance(result, CursorResult) or result.rowcount != 1:
        raise InvitationNotValid(InvitationNotValid.Reason.USED)
    scope = TenantScope(pending.tenant_id)
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="member.invite_accept",
        target_type="member",
        target_id=pending.member_id,
        details={"invitation_id": pending.id},
    )
    return await _member(session, scope, pending.member_id)
