"""Operator console accounts: an email and an argon2id hash, outside any tenant (an unscoped session)."""

from __future__ import annotations

import re
import secrets

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record_operator
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import new_id
from switchyard.platform.http.errors import Conflict, InvalidRequest, NotFound
from switchyard.platform.identity.passwords import check_new_password, hash_password
from switchyard.platform.members.schemas import EMAIL_PATTERN
from switchyard.platform.models import OperatorAccount, OperatorConsoleSession, utc_now

__all__ = [
    "create_operator_account",
    "disable_operator_account",
    "find_operator_account",
    "list_operator_accounts",
    "reset_operator_password",
]


async def find_operator_account(session: AsyncSession, email: str) -> OperatorAccount | None:
    statement = select(OperatorAccount).where(col(OperatorAccount.email) == email.strip().lower())
    return (await session.execute(statement)).scalar_one_or_none()


async def create_operator_account(
    session: AsyncSession, *, actor: Actor, email: str, password: str | None = None
) -> tuple[OperatorAccount, str]:
    """A new operator account; returns it with its password (a random one-time password unless given), which is
    printed once and never stored. Recorded in the operator audit log."""
    email = email.strip().lower()
    if len(email) > 320 or not re.fullmatch(EMAIL_PATTERN, email):
        raise InvalidRequest(f"{email!r} is not an email address", param="email", code="invalid_value")
    if await find_operator_account(session, email) is not None:
        raise Conflict(f"an operator account for {email} exists already", param="email")
    password = password if password is not None else secrets.token_urlsafe(18)
    check_new_password(password)
    account = OperatorAccount(id=new_id("opa"), email=email, password_hash=await hash_password(password))
    session.add(account)
    record_operator(
        session,
        actor=actor,
        action="operator_account.create",
        target_type="operator_account",
        target_id=account.id,
        details={"email": email},
    )
    await session.flush()
    return account, password


async def reset_operator_password(session: AsyncSession, *, actor: Actor, email: str) -> str:
    """A new one-time password for an existing account (the old one stops working at once); audited."""
    account = await find_operator_account(session, email)
    if account is None:
        raise NotFound(f"no operator account for {email}", param="email")
    password = secrets.token_urlsafe(18)
    account.password_hash = await hash_password(password)
    record_operator(
        session,
        actor=actor,
        action="operator_account.reset_password",
        target_type="operator_account",
        target_id=account.id,
        details={"email": account.email},
    )
    await session.flush()
    return password


async def list_operator_accounts(session: AsyncSession) -> list[OperatorAccount]:
    rows = await session.execute(select(OperatorAccount).order_by(col(OperatorAccount.created_at)))
    return list(rows.scalars())


async def disable_operator_account(session: AsyncSession, *, actor: Actor, email: str) -> OperatorAccount:
    """Stop an account signing in and end its live sessions at once (the row stays, for the audit log's names);
    ``reset-password`` does not enable it again. Disabling twice changes nothing."""
    account = await find_operator_account(session, email)
    if account is None:
        raise NotFound(f"no operator account for {email}", param="email")
    if account.disabled_at is None:
        now = utc_now()
        account.disabled_at = now
        await session.execute(
            update(OperatorConsoleSession)
            .where(
                col(OperatorConsoleSession.operator_id) == account.id, col(OperatorConsoleSession.ended_at).is_(None)
            )
            .values(ended_at=now)
        )
        record_operator(
            session,
            actor=actor,
            action="operator_account.disable",
            target_type="operator_account",
            target_id=account.id,
            details={"email": account.email},
        )
        await session.flush()
    return account
