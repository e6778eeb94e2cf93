"""Short transactions of their own for billing work that must be atomic across processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from switchyard.platform.db import Database, scope_session

__all__ = ["own_transaction"]


@asynccontextmanager
async def own_transaction(target: Database | AsyncSession, scope: Any) -> AsyncIterator[AsyncSession]:
    """A session in a new transaction that commits on success (``Database``), or the caller's (``AsyncSession``).

    On SQLite the new transaction starts with ``BEGIN IMMEDIATE``: it takes the database's write lock before
    its first read, so a read-then-update cannot fail on a stale snapshot and concurrent writers queue on
    ``busy_timeout`` instead. On PostgreSQL it is a plain READ COMMITTED transaction; correctness comes from
    conditional ``UPDATE`` statements, which re-check their condition on the latest row version.
    """
    if isinstance(target, AsyncSession):
        yield target
        return
    async with target.session() as session:
        scope_session(session, scope)
        if target.is_sqlite:
            await session.execute(text("BEGIN IMMEDIATE"))
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()
