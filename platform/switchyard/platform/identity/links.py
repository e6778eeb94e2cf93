"""The console's one-time links (invitations, password resets): a secret shown or mailed once and stored only as its
SHA-256, naming one member, that works once (``used``) until it expires."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, Protocol, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.models import Member, utc_now

__all__ = ["LinkNotValid", "LinkRow", "absolute", "new_secret", "redeemable", "sha256"]

MAX_SECRET_LENGTH = 128


class LinkNotValid(Exception):
    """A link that cannot be used: its ``reason`` says why (unknown, used or expired)."""

    class Reason(Enum):
        UNKNOWN = "unknown"
        USED = "used"
        EXPIRED = "expired"

    def __init__(self, reason: LinkNotValid.Reason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class LinkRow(Protocol):
    member_id: str
    token_sha256: str
    expires_at: datetime


Row = TypeVar("Row", bound=LinkRow)


def sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> tuple[str, str]:
    """A new link's secret and the SHA-256 that is stored of it."""
    secret = secrets.token_urlsafe(32)
    return secret, sha256(secret)


def absolute(base_url: str, path: str, secret: str) -> str:
    """The address of the link on the console served at ``base_url``."""
    return f"{base_url.rstrip('/')}{path}{secret}"


async def redeemable(
    session: AsyncSession,
    table: type[Row],
    secret: str,
    *,
    used: Callable[[Row], Any],
    error: type[LinkNotValid],
) -> tuple[Row, Member]:
    """The link of ``table`` that ``secret`` names and its member, if it may be used (an unscoped session: the link
    decides the tenant); raises ``error`` for an unknown, used or expired one."""
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        raise error(LinkNotValid.Reason.UNKNOWN)
    found = (
        await session.execute(
            select(table, Member)
            .join(Member, col(Member.id) == col(table.member_id))
            .where(col(table.token_sha256) == sha256(secret))
        )
    ).first()
    if found is None:
        raise error(LinkNotValid.Reason.UNKNOWN)
    row, member = found
    if used(row) is not None:
        raise error(LinkNotValid.Reason.USED)
    if row.expires_at <= utc_now():
        raise error(LinkNotValid.Reason.EXPIRED)
    return row, member
