"""Statements of vector stores: rows by id within a tenant, and files' status counts."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import NotFound
from switchyard.platform.knowledge.vector_stores.schemas import FileCounts
from switchyard.platform.models import (
    VectorStore,
    VectorStoreFile,
    VectorStoreFileBatch,
)

__all__ = [
    "batch_row",
    "file_counts",
    "store_file_row",
    "store_row",
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
