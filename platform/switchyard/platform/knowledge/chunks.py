"""Removing a file's chunks from a vector store, with the store's ``usage_bytes`` and ``revision`` following.

Both deleting a file (``files``) and detaching it or failing its ingestion (``vector_stores``) need it: it sits
below both.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.models import KnowledgeChunk, VectorStore, VectorStoreFile

__all__ = ["remove_chunks"]


async def remove_chunks(session: AsyncSession, scope: TenantScope, vector_store_id: str, file_id: str | None) -> None:
    """Delete a file's chunks from a store (every file's when ``file_id`` is None), taking their bytes off the
    store's ``usage_bytes`` and bumping its ``revision``."""
    condition = [
        col(KnowledgeChunk.tenant_id) == scope.tenant_id,
        col(KnowledgeChunk.vector_store_id) == vector_store_id,
    ]
    if file_id is not None:
        condition.append(col(KnowledgeChunk.file_id) == file_id)
    await session.execute(delete(KnowledgeChunk).where(*condition).execution_options(synchronize_session=False))
    file_condition = [
        col(VectorStoreFile.tenant_id) == scope.tenant_id,
        col(VectorStoreFile.vector_store_id) == vector_store_id,
    ]
    if file_id is not None:
        file_condition.append(col(VectorStoreFile.file_id) == file_id)
    freed = (
        await session.execute(
            select(func.coalesce(func.sum(col(VectorStoreFile.usage_bytes)), 0)).where(*file_condition)
        )
    ).scalar_one()
    await session.execute(
        update(VectorStore)
        .where(col(VectorStore.tenant_id) == scope.tenant_id, col(VectorStore.id) == vector_store_id)
        .values(
            usage_bytes=func.max(col(VectorStore.usage_bytes) - int(freed), 0)
            if session.get_bind().dialect.name == "sqlite"
            else func.greatest(col(VectorStore.usage_bytes) - int(freed), 0),
            revision=col(VectorStore.revision) + 1,
        )
        .execution_options(synchronize_session=False)
    )
