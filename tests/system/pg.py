"""The test's own PostgreSQL access: a fresh database per run, the admin connection that terminates the
application's connections, and the reads of the oracle (as the server's superuser, so row-level security does
not hide other tenants' rows). Each call opens its own short connection: a fault may kill any of them."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["Pg"]


class Pg:
    def __init__(self, server_url: str) -> None:
        url = make_url(server_url).set(drivername="postgresql")
        self.name = f"switchyard_system_{uuid.uuid4().hex[:10]}"
        self.admin_url = url.set(database="postgres").render_as_string(hide_password=False)
        self.url = url.set(database=self.name).render_as_string(hide_password=False)

    def create(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, connect_timeout=5) as connection:
            return list(connection.execute(sql, params).fetchall())

    def terminate_backends(self) -> int:
        """Terminate every connection to the test database except this one (from the admin database)."""
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            row = connection.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            ).fetchone()
        return int(row[0]) if row else 0

    def blocked(self) -> list[str]:
        """The application's sessions waiting for a lock, and the sessions idle inside a transaction (what a
        frozen process leaves behind), as short descriptions."""
        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            rows = connection.execute(
                "SELECT state, wait_event_type, now() - xact_start, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) "
                "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
                "AND (wait_event_type = 'Lock' OR state = 'idle in transaction')",
                (self.name,),
            ).fetchall()
        return [f"{state}/{wait or '-'} for {str(age).split('.')[0]}: {query}" for state, wait, age, query in rows]

    def leased_runs(self, owner: str) -> list[str]:
        """Runs ``owner`` (a worker's ``host:pid``; its leases are held as ``host:pid#<execution>``) holds an
        unexpired lease on."""
        try:
            found = self.rows(
                "SELECT id FROM runs WHERE split_part(lease_owner, '#', 1) = %s AND status = 'in_progress' "
                "AND lease_expires_at > now()",
                owner,
            )
        except psycopg.Error:
            return []
        return [str(row[0]) for row in found]

    def step_ids(self, run_ids: list[str]) -> dict[str, str]:
        """Step id -> run id, for the given runs."""
        out = {}
        for run_id, state in self.rows("SELECT id, state FROM runs WHERE id = ANY(%s)", run_ids):
            for step in (state or {}).get("steps") or []:
                out[str(step["id"])] = str(run_id)
        return out

    def run_moved_on(self, run_id: str, owner: str) -> bool:
        """Whether another worker took the run over (or it ended) since ``owner`` held it."""
        try:
            found = self.rows("SELECT lease_owner, status FROM runs WHERE id = %s", run_id)
        except psycopg.Error:
            return False
        if not found:
            return True
        lease_owner, status = found[0]
        moved = lease_owner is not None and lease_owner.split("#")[0] != owner
        return status not in ("queued", "in_progress") or moved
