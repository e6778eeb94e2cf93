"""Short SQLite writes on the event loop's own thread, for the gateway's hot path.

aiosqlite runs every statement on a worker thread, so one INSERT + COMMIT costs several thread hand-offs,
each far longer than the write itself (SQLite is a library: an insert into a WAL database is tens of
microseconds). ``InlineWriter.write`` runs a unit of work inline instead, on one dedicated connection that
never waits for a lock (``busy_timeout=0``): when another writer holds the lock it returns ``False`` having
written nothing, and the caller takes the ordinary (threaded, waiting) path. The connection never
checkpoints the WAL itself (an fsync on the loop would stall every request); a worker thread checkpoints it every
``CHECKPOINT_EVERY`` inline commits, and restarts it: a passive checkpoint alone never catches up while requests
keep writing, so the WAL would grow without bound on disk, and the cost of every write with it (measured alone
here: ~140 us a receipt with the WAL restarted every 200 commits, ~280 us after 2,000 commits without).
:func:`insert_rows` is the statement those writes use: rows handed to the driver as SQLite stores them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError

from switchyard.platform.db.sqlite import configure_sqlite

__all__ = ["CHECKPOINT_EVERY", "InlineWriter", "insert_rows"]

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 500
RESTART_WAIT_MS = 100
"""How long the restart waits for readers of the old WAL, writers held off meanwhile (inline writes take the ordinary
path and wait): a long read costs the requests writing then at most this, and the next checkpoint tries again."""


def _configure(dbapi_connection: Any, _record: Any) -> None:
    """The platform's pragmas, but never wait for a lock and never checkpoint."""
    configure_sqlite(dbapi_connection, busy_timeout_ms=0)
    dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")


def _is_lock_conflict(exc: OperationalError) -> bool:
    message = str(exc.orig).lower()
    return "locked" in message or "busy" in message


class InlineWriter:
    """Inline writes to one SQLite database (``sqlite:///path`` URL with the stdlib driver)."""

    def __init__(self, sync_url: str) -> None:
        self._engine: Engine = create_engine(sync_url, pool_size=2, max_overflow=0)
        event.listen(self._engine, "connect", _configure)
        self._connection: Connection | None = None
        self._commits = 0
        self._checkpointing: asyncio.Future[None] | None = None

    def write(self, work: Callable[[Connection], object]) -> bool:
        """Run ``work`` in one transaction now; ``False`` (nothing written) if another writer holds the lock."""
        if self._connection is None:
            self._connection = self._engine.connect()
        try:
            with self._connection.begin():
                work(self._connection)
        except OperationalError as exc:
            if _is_lock_conflict(exc):
                return False
            raise
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            self._checkpoint_soon()
        return True

    def _checkpoint_soon(self) -> None:
        if self._checkpointing is not None and not self._checkpointing.done():
            return
        self._checkpointing = asyncio.get_running_loop().run_in_executor(None, self._checkpoint)

    def _checkpoint(self) -> None:
        """Copy the WAL into the database while writers go on (``PASSIVE``), then the frames they added meanwhile
        with writers held off (``RESTART``: an inline write finds the lock taken and takes the ordinary path,
        which waits), so that the next write starts the WAL from its beginning."""
        try:
            with self._engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
                connection.exec_driver_sql(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
                try:
                    connection.exec_driver_sql("PRAGMA wal_checkpoint(RESTART)")
                finally:  # the pool's connections never wait (the next might be the loop's)
                    connection.exec_driver_sql("PRAGMA busy_timeout=0")
        except Exception:  # a failed checkpoint loses nothing; the next one catches up
            log.warning("WAL checkpoint failed", exc_info=True)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._engine.dispose()


def insert_rows(connection: Connection, table: str, rows: Sequence[dict[str, object]], *, on_conflict: str = "") -> int:
    """Insert ``rows`` (dicts with the same keys, in the same order) into ``table`` on a SQLite connection, in one
    statement handed to the driver; returns how many were inserted. ``on_conflict``: an upsert clause
    (``"(tenant_id, event_id) DO NOTHING"``). Values go as SQLite stores them, timestamps as naive UTC text with
    microseconds (SQLAlchemy's format there, which reads them back): a compiled statement's bind processing costs
    more than the insert itself, on every answered request."""
    if not rows:
        return 0
    statement = _insert(table, tuple(rows[0]), on_conflict)
    return connection.exec_driver_sql(statement, [_sqlite_values(row) for row in rows]).rowcount


@cache
def _insert(table: str, columns: tuple[str, ...], on_conflict: str) -> str:
    conflict = f" ON CONFLICT {on_conflict}" if on_conflict else ""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}){conflict}"


def _sqlite_values(row: dict[str, object]) -> tuple[object, ...]:
    return tuple(_utc_text(value) if isinstance(value, datetime) else value for value in row.values())


def _utc_text(value: datetime) -> str:
    if value.tzinfo is None:  # ``astimezone`` would take it as the machine's local time
        raise ValueError(f"a naive datetime ({value.isoformat()}) cannot be stored: give it a time zone")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
