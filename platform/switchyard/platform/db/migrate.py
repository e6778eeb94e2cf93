"""Alembic, driven from code: ``switchyard db upgrade|downgrade|current`` and the tests use these."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config

from switchyard.platform.db.engine import sync_url

__all__ = ["alembic_config", "current_revision", "downgrade", "migrations_dir", "upgrade"]


def migrations_dir() -> Path:
    """The Alembic environment: packaged inside the wheel, or ``migrations/`` of a source checkout."""
    packaged = Path(__file__).resolve().parents[1] / "migrations"
    if (packaged / "env.py").exists():
        return packaged
    checkout = Path(__file__).resolve().parents[4] / "migrations"
    if (checkout / "env.py").exists():
        return checkout
    raise FileNotFoundError("no Alembic environment found (expected migrations/env.py)")


def alembic_config(database_url: str, stdout: TextIO | None = None) -> Config:
    config = Config(stdout=stdout) if stdout is not None else Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", sync_url(database_url).replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "-1") -> None:
    command.downgrade(alembic_config(database_url), revision)


def current_revision(database_url: str) -> str:
    """The database's current revision as Alembic prints it (empty when unmigrated)."""
    out = io.StringIO()
    command.current(alembic_config(database_url, stdout=out))
    return out.getvalue().strip()
