"""The pragmas every SQLite connection of the platform gets (WAL, foreign keys, a busy timeout)."""

from __future__ import annotations

from typing import Any

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "configure_sqlite"]

SQLITE_BUSY_TIMEOUT_MS = 30_000


def configure_sqlite(
    dbapi_connection: Any, _record: Any = None, *, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> None:
    """A ``connect`` event listener: WAL journal, ``busy_timeout_ms``, foreign keys, ``synchronous=NORMAL``."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
