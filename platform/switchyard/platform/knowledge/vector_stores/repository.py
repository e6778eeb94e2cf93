"""Statements of vector stores: rows by id within a tenant, files' status counts, and chunk removal."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import NotFound
from switchyard.platform.knowledge.vector_stores.schemas import FileCounts
from switchyard.platform.models import (
    KnowledgeChunk,
    StoredFile,
    VectorStore,
    VectorStoreFile,
    VectorStoreFileBatch,
    utc_now,
)

__all__ = [
    "batch_row",
    "file_counts",
    "remove_chunks",
    "store_file_row",
    "store_row",
    "stored_file",
]


async def store_row(session: AsyncSession, scope: TenantScope, vector_store_id: str) -> VectorStore:
    """The tenant's store (404 for a deleted one, or another tenant's)."""
    statement = select(VectorStore).where(
        col(VectorStore.tenant_id) == scope.tenant_id, col(VectorStore.id) == vector_store_id
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None:
        raise NotFound(f"no vector store {vector_store_id!r}", param="vector_store_id")
    return row


async def stored_file(session: AsyncSession, scope: TenantScope, file_id: str, *, param: str = "file_id") -> StoredFile:
    """The tenant's live file (404 naming ``param`` for a deleted or expired one, or another tenant's)."""
    statement = select(StoredFile).where(col(StoredFile.tenant_id) == scope.tenant_id, col(StoredFile.id) == file_id)
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None or row.deleted_at is not None or (row.expires_at is not None and row.expires_at <= utc_now()):
        raise NotFound(f"no file {file_id!r}", param=param)
    return row


async def store_file_row(
    session: AsyncSession, scope: TenantScope, vector_store_id: str, file_id: str
) -> VectorStoreFile:
    """The file as attached to the store (404 when it is not)."""
    statement = select(VectorStoreFile).where(
        col(VectorStoreFile.tenant_id) == scope.tenant_id,
        col(VectorStoreFile.vector_store_id) == vector_store_id,
        col(VectorStoreFile.file_id) == file_id,
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no file {file_id!r} in vector store {vector_store_id!r}", param="file_id")
    return row


async def batch_row(
    session: AsyncSession, scope: TenantScope, vector_store_id: str, batch_id: str
) -> VectorStoreFileBatch:
    statement = select(VectorStoreFileBatch).where(
        col(VectorStoreFileBatch.tenant_id) == scope.tenant_id,
        col(VectorStoreFileBatch.vector_store_id) == vector_store_id,
        col(VectorStoreFileBatch.id) == batch_id,
    )
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no file batch {batch_id!r} in vector store {vector_store_id!r}", param="batch_id")
    return row


async def file_counts(
    session: AsyncSession, scope: TenantScope, vector_store_ids: Iterable[str], *, batch_id: str | None = None
) -> dict[str, FileCounts]:
    """Each store's (or one batch's) files by status."""
    ids = list(vector_store_ids)
    statement = (
        select(col(VectorStoreFile.vector_store_id), col(VectorStoreFile.status), func.count())
        .where(col(VectorStoreFile.tenant_id) == scope.tenant_id, col(VectorStoreFile.vector_store_id).in_(ids))
        .group_by(col(VectorStoreFile.vector_store_id), col(VectorStoreFile.status))
    )
    if batch_id is not None:
        statement = statement.where(col(VectorStoreFile.batch_id) == batch_id)
    counts = {store_id: FileCounts() for store_id in ids}
    for store_id, status, count in (await session.execute(statement)).all():
        counts[store_id] = counts[store_id].model_copy(update={status: count, "total": counts[store_id].total + count})
    return counts


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
