"""Database objects no model declares: the full-text index of vector stores' chunks (migration 0019), which differs
by layout (FTS5 tables and triggers on SQLite; a generated ``tsvector`` column and its GIN index on PostgreSQL).
Autogenerate leaves them out (``include_object``, used by ``migrations/env.py`` and the migration tests)."""

from __future__ import annotations

from typing import Any

__all__ = ["FTS_TABLE", "TEXT_SEARCH_COLUMN", "TEXT_SEARCH_INDEX", "include_object"]

FTS_TABLE = "knowledge_chunks_fts"
TEXT_SEARCH_COLUMN = "text_search"
TEXT_SEARCH_INDEX = "ix_knowledge_chunks_text_search"


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's ``include_object``: whether autogenerate compares this object (not the full-text index's)."""
    if type_ == "table" and name is not None and name.startswith(FTS_TABLE):
        return False
    if type_ == "column" and name == TEXT_SEARCH_COLUMN and getattr(obj, "table", None) is not None:
        return bool(obj.table.name != "knowledge_chunks")
    return not (type_ == "index" and name == TEXT_SEARCH_INDEX)
