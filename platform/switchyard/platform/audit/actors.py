"""Who an audit row's actor is, for a person to read: an audit row keeps only the actor's id (a member's, an API
key's, an operator account's or key's, or ``cli``), which this turns into a member's e-mail, a key's name and
redacted value, an operator's e-mail, or "CLI".

A tenant's log names its own members and keys only (read with the tenant's scope); operators are named in both logs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import ApiKey, Member, OperatorAccount, OperatorKey

__all__ = ["ActorKind", "ActorName", "actor_names"]


class ActorKind(Enum):
    MEMBER = "member"
    API_KEY = "api key"
    OPERATOR = "operator"
    OPERATOR_KEY = "operator key"
    CLI = "CLI"
    SIGN_IN = "sign-in"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ActorName:
    """An actor as a page shows it: ``label`` (an e-mail, a key's name and redacted value) and what it is."""

    id: str
    label: str
    kind: ActorKind


_FIXED = {
    "cli": ActorName("cli", "CLI", ActorKind.CLI),
    "console": ActorName("console", "Console sign-in (nobody signed in)", ActorKind.SIGN_IN),
}
_GONE = {"mem": ("A removed member", ActorKind.MEMBER)}


def _redacted(short_id: str) -> str:
    return f"sy_{short_id}_…"


def _key_label(name: str, short_id: str) -> str:
    return f"{name} ({_redacted(short_id)})" if name else _redacted(short_id)


async def actor_names(
    session: AsyncSession, actor_ids: Collection[str], scope: TenantScope | None
) -> dict[str, ActorName]:
    """A name for each of ``actor_ids``: members and API keys of ``scope``'s tenant (none without a scope) and
    operators; an id nobody answers to keeps its id as its label."""
    ids = set(actor_ids)
    names = {i: _FIXED[i] for i in ids if i in _FIXED}
    if scope is not None:
        members = select(col(Member.id), col(Member.email)).where(
            col(Member.tenant_id) == scope.tenant_id, col(Member.id).in_(ids)
        )
        for member_id, email in (await session.execute(members)).all():
            names[member_id] = ActorName(member_id, email, ActorKind.MEMBER)
        keys = select(col(ApiKey.id), col(ApiKey.name), col(ApiKey.short_id)).where(
            col(ApiKey.tenant_id) == scope.tenant_id, col(ApiKey.id).in_(ids)
        )
        for key_id, name, short_id in (await session.execute(keys)).all():
            names[key_id] = ActorName(key_id, _key_label(name, short_id), ActorKind.API_KEY)
    operators = select(col(OperatorAccount.id), col(OperatorAccount.email)).where(col(OperatorAccount.id).in_(ids))
    for operator_id, email in (await session.execute(operators)).all():
        names[operator_id] = ActorName(operator_id, email, ActorKind.OPERATOR)
    operator_keys = select(col(OperatorKey.id), col(OperatorKey.name), col(OperatorKey.short_id)).where(
        col(OperatorKey.id).in_(ids)
    )
    for key_id, name, short_id in (await session.execute(operator_keys)).all():
        names[key_id] = ActorName(key_id, _key_label(name, short_id), ActorKind.OPERATOR_KEY)
    for unnamed in ids - names.keys():
        label, kind = _GONE.get(unnamed.partition("_")[0], (unnamed, ActorKind.UNKNOWN))
        names[unnamed] = ActorName(unnamed, label if label == unnamed else f"{label} ({unnamed})", kind)
    return names
