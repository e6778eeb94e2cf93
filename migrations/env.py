"""Alembic environment: the target metadata is every SQLModel table of ``switchyard.platform.models``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool
from sqlmodel import SQLModel

import switchyard.platform.models  # noqa: F401  (registers the tables)
from switchyard.platform.db.unmodelled import include_object  # the full-text index is 0019's, no model's

config = context.config
target_metadata = SQLModel.metadata


def _url() -> str:
    """The URL Alembic was given (``switchyard db upgrade`` sets it), else ``SWITCHYARD_DATABASE_URL``'s (the
    ``alembic`` command line, to write a revision against a scratch database)."""
    from switchyard.platform.db.engine import sync_url
    from switchyard.platform.settings import load_settings

    return config.get_main_option("sqlalchemy.url") or sync_url(load_settings().database_url)


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is None:
        engine = create_engine(_url(), poolclass=pool.NullPool)
        with engine.connect() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connectable)


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
