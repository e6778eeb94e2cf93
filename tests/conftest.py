"""Shared fixtures: real databases (SQLite always, PostgreSQL when configured), the app and its clients.

PostgreSQL and Redis suites run when ``SWITCHYARD_TEST_POSTGRES_URL`` / ``SWITCHYARD_TEST_REDIS_URL`` are set;
otherwise they are skipped and the run says so at the end. When a URL is set but the service does not answer,
the tests fail rather than skip. Every database is built by ``alembic upgrade head``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_ENV = "SWITCHYARD_TEST_POSTGRES_URL"
REDIS_ENV = "SWITCHYARD_TEST_REDIS_URL"
REPO_ROOT = Path(__file__).resolve().parents[1]

# Console passwords at OWASP's minimum argon2id cost (about 20 ms a hash instead of 150): the suite hashes some
# thousands of them. Processes the tests start inherit it; the default cost is tested in test_console_sign_in.py.
os.environ.setdefault("SWITCHYARD_PASSWORD_HASH", "m=19456,t=2,p=1")

_skipped_suites: dict[str, str] = {}


def _skip_suite(suite: str, reason: str) -> None:
    _skipped_suites[suite] = reason
    pytest.skip(f"{suite} suite skipped: {reason}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skipped_suites:
        terminalreporter.section("skipped suites")
        for suite, reason in sorted(_skipped_suites.items()):
            terminalreporter.write_line(f"{suite}: {reason}")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        _skip_suite("postgres", f"{POSTGRES_ENV} is not set")
    return str(url)


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get(REDIS_ENV)
    if not url:
        _skip_suite("redis", f"{REDIS_ENV} is not set")
    import redis

    redis.Redis.from_url(str(url), socket_connect_timeout=3).ping()  # fail loudly if configured but down
    return str(url)


@pytest.fixture
def redis_database(redis_url: str) -> Iterator[str]:
    """A Redis database 1-14 that no other test holds, emptied: a broker of the test's own (another test's
    workers would take its jobs)."""
    from tests.support.redis_databases import redis_database_of_its_own

    with redis_database_of_its_own(redis_url) as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to head once; each test gets a copy."""
    from switchyard.platform.db.migrate import upgrade

    path = tmp_path_factory.mktemp("template") / "switchyard.db"
    upgrade(f"sqlite:///{path}")
    return path


def _admin_url(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_database(postgres_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, migrated to head, dropped at the end."""
    from switchyard.platform.db import sync_url
    from switchyard.platform.db.migrate import upgrade

    name = f"switchyard_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(sync_url(_admin_url(postgres_url, "postgres")), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = _admin_url(postgres_url, name)
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _delete_all_rows(url: str) -> None:
    """Empty every table, children before their parents, in one transaction. A DELETE of the few rows a test
    leaves takes ~20 ms; ``TRUNCATE`` of the 41 tables (new files for each table and index, synced at commit) took
    1.2-2.4 s after every PostgreSQL test here."""
    from sqlmodel import SQLModel

    from switchyard.platform.db import sync_url

    engine = create_engine(sync_url(url))
    with engine.begin() as connection:
        for table in reversed(SQLModel.metadata.sorted_tables):
            connection.execute(text(f'DELETE FROM "{table.name}"'))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of each kind, private to the test."""
    if request.param == "sqlite":
        path = tmp_path / "switchyard.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    url = request.getfixturevalue("postgres_database")
    try:
        yield url
    finally:
        _delete_all_rows(url)


@pytest.fixture(scope="session")
def shared_apps() -> Any:
    """This worker's apps, each reset for the next test whose settings it fits (tests/support/shared_app.py)."""
    from tests.support.shared_app import SharedApps

    return SharedApps()


@pytest.fixture
def settings(database_url: str, tmp_path: Path, shared_apps: Any) -> Any:
    """The default settings (time scale 0) on the test's database and a data directory of its own."""
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url)


@pytest.fixture
async def client(settings: Any, shared_apps: Any) -> AsyncIterator[Any]:
    """An HTTP client of the app on ``settings``, with its lifespan (database) running: a worker's shared app,
    reset, on settings ``shared_apps.settings`` made; a new app on any others."""
    from litestar.testing import AsyncTestClient

    async with AsyncTestClient(app=shared_apps.app(settings), base_url="http://switchyard.test") as test_client:
        yield test_client


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[Any]:
    """Base URL (``http://127.0.0.1:<port>/v1``) of a running fake OpenAI-compatible upstream."""
    from switchyard.accelerator.pool.echo_upstream import EchoUpstream
    from tests.support.served import served

    app = EchoUpstream()
    with served(app, lifespan="on") as url:
        app.base_url = f"{url}/v1"  # type: ignore[attr-defined]
        yield app
