"""Operators' console sessions: a member session's mechanics (``console.sessions``) in their own table and cookie.

The same lifetime and idle timeout, the cookie's secret stored only as SHA-256; a session names an operator
account, never a tenant, and a disabled account's sessions stop at once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import new_id
from switchyard.platform.identity.sessions import SESSION_LIFETIME, TOUCH_AFTER, live_session, token_sha256
from switchyard.platform.models import OperatorAccount, OperatorConsoleSession, utc_now

__all__ = ["OperatorUser", "end_operator_session", "resolve_operator_session", "start_operator_session"]


@dataclass(frozen=True, slots=True)
class OperatorUser:
    """The signed-in operator behind a console request."""

    session_id: str
    operator_id: str
    email: str
    csrf_token: str


async def start_operator_session(session: AsyncSession, *, account: OperatorAccount) -> tuple[str, str]:
    """A new session for ``account``: the cookie's secret (never stored) and the session's id."""
    token = secrets.token_urlsafe(32)
    now = utc_now()
    row = OperatorConsoleSession(
        id=new_id("ocs"),
        token_sha256=token_sha256(token),
        operator_id=account.id,
        csrf_token=secrets.token_urlsafe(32),
        created_at=now,
        last_seen_at=now,
        expires_at=now + SESSION_LIFETIME,
    )
    session.add(row)
    await session.flush()
    return token, row.id


async def resolve_operator_session(session: AsyncSession, token: str) -> OperatorUser | None:
    """The live session the cookie names (of an account not disabled), or ``None``."""
    if not token or len(token) > 128:
        return None
    now = utc_now()
    statement = (
        select(OperatorConsoleSession, OperatorAccount)
        .join(OperatorAccount, col(OperatorAccount.id) == col(OperatorConsoleSession.operator_id))
        .where(*live_session(OperatorConsoleSession, token, now), col(OperatorAccount.disabled_at).is_(None))
    )
    found = (await session.execute(statement)).first()
    if found is None:
        return None
    row, account = found
    if row.last_seen_at < now - TOUCH_AFTER:
        await session.execute(
            update(OperatorConsoleSession).where(col(OperatorConsoleSession.id) == row.id).values(last_seen_at=now)
        )
    return OperatorUser(session_id=row.id, operator_id=account.id, email=account.email, csrf_token=row.csrf_token)


async def end_operator_session(session: AsyncSession, *, session_id: str) -> None:
    await session.execute(
        update(OperatorConsoleSession)
        .where(col(OperatorConsoleSession.id) == session_id, col(OperatorConsoleSession.ended_at).is_(None))
        .values(ended_at=utc_now())
    )
