"""Migrations: empty -> head -> base -> head on SQLite and PostgreSQL, and models == migrated schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

from switchyard.platform.db import sync_url
from switchyard.platform.db.migrate import current_revision, downgrade, upgrade
from switchyard.platform.db.unmodelled import include_object


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    name = f"switchyard_mig_{uuid.uuid4().hex[:10]}"
    admin = create_engine(sync_url(base), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(sync_url(url))
    try:
        names = set(inspect(engine).get_table_names()) - {"alembic_version"}
        return {name for name in names if include_object(None, name, "table", True, None)}  # not the FTS5 tables
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_database: str) -> None:
    model_tables = {t.name for t in SQLModel.metadata.sorted_tables}
    assert _tables(empty_database) == set()
    upgrade(empty_database)
    assert _tables(empty_database) == model_tables
    assert "(head)" in current_revision(empty_database)
    downgrade(empty_database, "base")
    assert _tables(empty_database) == set()
    upgrade(empty_database)
    assert _tables(empty_database) == model_tables


def test_autogenerate_finds_no_difference(empty_database: str) -> None:
    upgrade(empty_database)
    engine = create_engine(sync_url(empty_database))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "include_object": include_object}
            )
            diff = compare_metadata(context, SQLModel.metadata)
    finally:
        engine.dispose()
    assert diff == []


@pytest.mark.slow  # starts a process
def test_the_alembic_command_line_migrates_the_database_switchyard_database_url_names(tmp_path: Path) -> None:
    """`migrations/README.md`'s way to write a revision: `alembic -c migrations/alembic.ini ...` with
    `SWITCHYARD_DATABASE_URL` set (the ini file holds no URL)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    database = tmp_path / "scratch.db"
    env = {**os.environ, "SWITCHYARD_DATABASE_URL": f"sqlite:///{database}", "SWITCHYARD_DATA_DIR": str(tmp_path)}
    alembic = [sys.executable, "-m", "alembic", "-c", str(root / "migrations" / "alembic.ini")]
    done = subprocess.run([*alembic, "upgrade", "head"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert current_revision(f"sqlite:///{database}") is not None


@pytest.mark.postgres
def test_two_databases_migrated_at_once_both_get_the_tenant_role(postgres_url: str) -> None:
    """The role is the cluster's: a migration that finds it missing while another's new role is not yet committed
    waits on it at CREATE ROLE, then takes it as there instead of failing (two test sessions' first migrations met
    this way: "duplicate key value violates unique constraint pg_authid_rolname_index")."""
    import importlib.util
    import threading

    path = Path(__file__).resolve().parents[3] / "migrations" / "versions" / "20261202_0005_row_level_security.py"
    spec = importlib.util.spec_from_file_location("row_level_security", path)
    assert spec is not None
    assert spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    role = f"switchyard_test_role_{uuid.uuid4().hex[:8]}"
    engine = create_engine(sync_url(postgres_url))
    failures: list[BaseException] = []

    def second() -> None:
        try:
            with engine.begin() as connection:
                connection.execute(text(migration.ensure_role(role)))
        except BaseException as error:  # reported by the assertion below
            failures.append(error)

    try:
        with engine.begin() as first:
            first.execute(text(migration.ensure_role(role)))  # created, not yet committed
            waiter = threading.Thread(target=second)
            waiter.start()
            with engine.connect() as observer:
                for _ in range(3000):  # the second session blocks on the first's uncommitted role
                    waiting = observer.execute(
                        text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE :q"),
                        {"q": f"%{role}%"},
                    ).scalar()
                    observer.rollback()  # the next look reads the statistics afresh, not this transaction's copy
                    if waiting:
                        break
                    threading.Event().wait(0.01)
                assert waiting, "the second migration never waited on the first's role"
        waiter.join(timeout=30)
        assert failures == []
        with engine.connect() as connection:
            assert connection.execute(text("SELECT pg_has_role(current_user, :r, 'MEMBER')"), {"r": role}).scalar()
    finally:
        with engine.begin() as connection:
            connection.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
        engine.dispose()
