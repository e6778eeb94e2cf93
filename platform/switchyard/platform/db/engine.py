"""Engines and session factories for SQLite (aiosqlite, WAL) and PostgreSQL (psycopg 3)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from switchyard.platform.db.direct import DirectWriter
from switchyard.platform.db.inline import InlineWriter
from switchyard.platform.db.scope import ScopedSession, TenantScope, scope_session
from switchyard.platform.db.sqlite import SQLITE_BUSY_TIMEOUT_MS, configure_sqlite

__all__ = ["IDLE_IN_TRANSACTION_TIMEOUT_MS", "Database", "async_url", "sync_url"]

log = logging.getLogger(__name__)

IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000
"""PostgreSQL ends a session left idle inside a transaction this long (the application's are milliseconds long)."""


def async_url(url: str) -> str:
    """The URL with the async driver this project uses for its dialect."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite or postgresql")


def sync_url(url: str) -> str:
    """The URL with a synchronous driver (migrations, CLI)."""
    parsed = make_url(async_url(url))
    driver = "sqlite" if parsed.get_backend_name() == "sqlite" else "postgresql+psycopg"
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def create_engine_for(url: str, *, idle_in_transaction_timeout_ms: int = IDLE_IN_TRANSACTION_TIMEOUT_MS) -> AsyncEngine:
    url = async_url(url)
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine.sync_engine, "connect", configure_sqlite)
        return engine
    return create_async_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=20,
        connect_args={"options": _postgres_options(idle_in_transaction_timeout_ms)},
    )


def _postgres_options(idle_in_transaction_timeout_ms: int) -> str:
    # A process frozen (SIGSTOP, a stuck thread) inside a transaction would hold its row locks, and every request
    # touching those rows (a tenant's budget, a run) would wait with it: PostgreSQL ends such a session instead.
    return f"-c idle_in_transaction_session_timeout={idle_in_transaction_timeout_ms}"


class Database:
    """One engine and its session factory; every session is tenant-scoped or explicitly unscoped."""

    def __init__(self, url: str, *, idle_in_transaction_timeout_ms: int = IDLE_IN_TRANSACTION_TIMEOUT_MS) -> None:
        self.url = url
        self.engine = create_engine_for(url, idle_in_transaction_timeout_ms=idle_in_transaction_timeout_ms)
        self.inline: InlineWriter | None = InlineWriter(sync_url(url)) if self.is_sqlite else None
        """SQLite only: short writes on the loop's thread (see ``db.inline``)."""
        self.direct: DirectWriter | None = (
            None if self.is_sqlite else DirectWriter(url, options=_postgres_options(idle_in_transaction_timeout_ms))
        )
        """PostgreSQL only: idempotent inserts on one kept connection (see ``db.direct``)."""
        self._sessions = async_sessionmaker(
            self.engine, class_=AsyncSession, sync_session_class=ScopedSession, expire_on_commit=False
        )

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def session(self) -> AsyncSession:
        """A new session with no scope yet (the edge sets it)."""
        return self._sessions()

    @asynccontextmanager
    async def unit_of_work(self, scope: TenantScope | Any) -> AsyncIterator[AsyncSession]:
        """A scoped session that commits once on success and rolls back on any error."""
        async with self._sessions() as session:
            scope_session(session, scope)
            try:
                yield session
            except BaseException:
                await session.rollback()
                raise
            await session.commit()

    async def ping(self) -> None:
        """Raise unless the database answers a trivial query (the readiness probe)."""
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        in_use = getattr(self.engine.pool, "checkedout", lambda: 0)()
        if in_use:  # work that outlived its process's shutdown: its connections are dropped unclosed
            log.warning("database closed with %d connection(s) still in use", in_use)
        if self.inline is not None:
            self.inline.close()
        if self.direct is not None:
            await self.direct.close()
        await self.engine.dispose()
