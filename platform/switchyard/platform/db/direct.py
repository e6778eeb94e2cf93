"""Short PostgreSQL writes on one kept connection, for the gateway's hot path.

Through a session, one receipt's INSERT and COMMIT cost about 2 ms of the API process's CPU (the pooled
connection's ping, the ORM session, the compiled statement's bind processing, BEGIN, COMMIT, the reset when the
connection goes back): on PostgreSQL the largest part of an answered request. ``DirectWriter`` keeps one psycopg
connection in autocommit mode and hands the driver one ``INSERT`` with its rows, a transaction of its own and one
round trip (about a quarter of the CPU). Writes on it take turns; callers batch.

It never retries. A write that fails (the server restarted, the connection was dropped, a statement refused) closes
the connection and raises, and the caller writes through a session instead. Only inserts that ignore a duplicate
key use it, so a write that committed before its acknowledgement was lost is harmless to repeat there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import cache

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["APPLICATION_NAME", "DirectWriter"]

APPLICATION_NAME = "switchyard-direct-writer"
"""The kept connection's name in ``pg_stat_activity``."""
CONNECT_TIMEOUT_S = 5
"""How long a connection may take to open: a server that does not answer sends the write through a session, not
into a wait of minutes."""


class DirectWriter:
    """Inserts into one PostgreSQL database (any ``postgresql`` URL) on one kept connection."""

    def __init__(self, url: str, *, options: str, connect_timeout_s: int = CONNECT_TIMEOUT_S) -> None:
        self._conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._options = options
        self._connect_timeout_s = connect_timeout_s
        self._connection: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._turn = asyncio.Lock()
        self._closed = False

    async def insert(self, table: str, rows: Sequence[dict[str, object]], *, on_conflict: str = "") -> int:
        """Insert ``rows`` (dicts with the same keys, in the same order) into ``table`` in one statement, its own
        transaction; returns how many were inserted. ``on_conflict``: ``"(tenant_id, event_id) DO NOTHING"``."""
        if not rows:
            return 0
        statement = _insert(table, tuple(rows[0]), len(rows), on_conflict)
        values = [value for row in rows for value in row.values()]
        async with self._turn:
            if self._closed:  # its database was disposed: a connection opened now would never be closed
                raise RuntimeError("the direct writer is closed")
            if self._connection is None or self._connection.closed:
                self._connection = await psycopg.AsyncConnection.connect(
                    self._conninfo,
                    autocommit=True,
                    options=self._options,
                    application_name=APPLICATION_NAME,
                    connect_timeout=self._connect_timeout_s,
                )
            try:
                cursor = await self._connection.execute(statement, values)
            except BaseException:
                await self._drop()
                raise
            return cursor.rowcount

    async def close(self) -> None:
        """Close the connection for good (the database is disposed): later inserts raise."""
        self._closed = True
        await self._drop()

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()


@cache
def _insert(table: str, columns: tuple[str, ...], count: int, on_conflict: str) -> str:
    conflict = f" ON CONFLICT {on_conflict}" if on_conflict else ""
    row = f"({', '.join(['%s'] * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([row] * count)}{conflict}"
