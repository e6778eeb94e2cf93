"""Dialect helpers: ``INSERT ... ON CONFLICT DO NOTHING`` on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["dialect_name", "insert_ignore", "insert_ignore_for"]


def dialect_name(session: AsyncSession) -> str:
    """``"sqlite"`` or ``"postgresql"``: the dialect of the session's connection."""
    return str(session.get_bind().dialect.name)


def insert_ignore(session: AsyncSession, table: Any, index_elements: list[str]) -> Any:
    """An ``INSERT`` into ``table`` that skips rows conflicting on the unique ``index_elements``."""
    return insert_ignore_for(dialect_name(session), table, index_elements)


def insert_ignore_for(dialect: str, table: Any, index_elements: list[str]) -> Any:
    """``insert_ignore`` for a dialect by name (for synchronous connections)."""
    module: Any = postgresql if dialect == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing(index_elements=index_elements)
