"""Positions in an ordered list a row owns (a conversation's items, a thread's messages), taken race-free.

Taking ``max(position) + 1`` is a race: two appends read the same maximum and the second collides with the first on
the list's unique position (a 500). The owner row counts instead: ``next_position`` is raised by the number of new
entries in one ``UPDATE ... RETURNING``, whose row lock (PostgreSQL) or write lock (SQLite) lasts until the commit,
so a concurrent append waits and takes the positions after these. Positions a rolled-back append took are skipped.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db.scope import TenantScope

__all__ = ["take_positions"]


async def take_positions(session: AsyncSession, owner: Any, *, scope: TenantScope, owner_id: str, count: int) -> int:
    """Reserve ``count`` positions in the list of ``owner``'s row ``owner_id`` (a table with ``next_position``);
    returns the first. The caller adds its entries at it and after, and commits."""
    taken = await session.execute(
        update(owner)
        .where(col(owner.tenant_id) == scope.tenant_id, col(owner.id) == owner_id)
        .values(next_position=col(owner.next_position) + count)
        .returning(col(owner.next_position))
        .execution_options(synchronize_session=False)
    )
    return int(taken.scalar_one()) - count
