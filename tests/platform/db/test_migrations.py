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
