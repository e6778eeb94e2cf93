"""Files attached to vector stores, one at a time or in batches: attach (and send to be ingested), list, read,
change attributes, detach; batches and their cancellation.

Attaching a file that is attached already changes nothing and answers the file as it is. A file's chunking
strategy is its own, else its batch's, else the store's, as static sizes (``service.chunk_sizes``). Each attached
file is one ``vector_stores.ingest`` job, sent once the request commits (``ingestion``); a lost send is found by
``vector_stores.recover``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.pagination import CursorParams, Page, unknown_cursor
from switchyard.platform.jobs import JobSender, enqueue
from switchyard.platform.knowledge.chunks import remove_chunks
from switchyard.platform.knowledge.files.service import file_row
from switchyard.platform.knowledge.vector_stores import repository
from switchyard.platform.knowledge.vector_stores.ingestion import INGEST_TASK
from switchyard.platform.knowledge.vector_stores.policy import chunk_sizes, touch
from switchyard.platform.knowledge.vector_stores.schemas import (
    FileBatchFile,
    FileBatchPublic,
    FileContentPage,
    FileContentPart,
    FileCounts,
    LastError,
    VectorStoreFileDeleted,
    VectorStoreFilePublic,
    unix,
)
from switchyard.platform.models import KnowledgeChunk, VectorStore, VectorStoreFile, VectorStoreFileBatch, utc_now

__all__ = [
    "FileStatus",
    "attach",
    "batch_public",
    "cancel_batch",
    "detach",
    "file_content",
    "file_public",
    "list_files",
    "set_attributes",
]

FileStatus = Literal["in_progress", "completed", "failed", "cancelled"]


def file_public(row: VectorStoreFile) -> VectorStoreFilePublic:
    return VectorStoreFilePublic(
        id=row.file_id,
        created_at=unix(row.created_at) or 0,
        usage_bytes=row.usage_bytes,
        vector_store_id=row.vector_store_id,
        status=row.status,  # type: ignore[arg-type]  # one of the four, as the column's writers set it
        last_error=LastError.model_validate(row.last_error) if row.last_error else None,
        chunking_strategy=dict(row.chunking_strategy),
        attributes=dict(row.attributes or {}),
    )


def batch_public(row: VectorStoreFileBatch, counts: FileCounts) -> FileBatchPublic:
    """A batch's status: as cancelled, cancelled; else in progress while a file is, failed when every file failed,
    completed otherwise."""
    if row.status == "cancelled":
        status = "cancelled"
    elif counts.in_progress:
        status = "in_progress"
    elif counts.total and counts.failed == counts.total:
        status = "failed"
    else:
        status = "completed"
    return FileBatchPublic(
        id=row.id,
        created_at=unix(row.created_at) or 0,
        vector_store_id=row.vector_store_id,
        status=status,  # type: ignore[arg-type]
        file_counts=counts,
    )


async def attach(
    session: AsyncSession,
    *,
    scope: TenantScope,
    store: VectorStore,
    entries: Sequence[FileBatchFile],
    batch_id: str | None,
    max_input_tokens: int,
    jobs: JobSender,
    api_key_id: str | None,
    param: str = "file_id",
) -> list[VectorStoreFile]:
    """Attach each file of ``entries`` (404 naming ``param`` for a file that is not the tenant's) and send its
    ingestion, billed to ``api_key_id`` (none: to the tenant only), once the session commits."""
    rows = []
    default = store.chunking_strategy
    for entry in entries:
        await file_row(session, scope, entry.file_id, param=param)
        existing = (
            await session.execute(
                select(VectorStoreFile).where(
                    col(VectorStoreFile.tenant_id) == scope.tenant_id,
                    col(VectorStoreFile.vector_store_id) == store.id,
                    col(VectorStoreFile.file_id) == entry.file_id,
                )
            )
        ).scalar_one_or_none()
        if existing is not None:
            rows.append(existing)
            continue
        sizes = (
            chunk_sizes(entry.chunking_strategy, max_input_tokens)
            if entry.chunking_strategy is not None
            else dict(default)
        )
        row = VectorStoreFile(
            row_id=new_id("vsf"),
            tenant_id=scope.tenant_id,
            vector_store_id=store.id,
            file_id=entry.file_id,
            batch_id=batch_id,
            api_key_id=api_key_id,
            chunking_strategy=sizes,
            attributes=dict(entry.attributes or {}),
        )
        session.add(row)
        rows.append(row)
        enqueue(jobs, INGEST_TASK, scope.tenant_id, row.row_id, session=session)
    touch(store)
    await session.flush()
    return rows


async def list_files(
    session: AsyncSession,
    *,
    scope: TenantScope,
    vector_store_id: str,
    params: CursorParams,
    status: FileStatus | None = None,
    batch_id: str | None = None,
) -> Page[VectorStoreFilePublic]:
    """The store's (or a batch's) files in the order they were attached; cursors are file ids."""
    statement = select(VectorStoreFile).where(
        col(VectorStoreFile.tenant_id) == scope.tenant_id, col(VectorStoreFile.vector_store_id) == vector_store_id
    )
    if status is not None:
        statement = statement.where(col(VectorStoreFile.status) == status)
    if batch_id is not None:
        statement = statement.where(col(VectorStoreFile.batch_id) == batch_id)
    order = col(VectorStoreFile.row_id)
    descending = params.order == "desc"
    for name, cursor in (("after", params.after), ("before", params.before)):
        if cursor is None:
            continue
        found = (
            await session.execute(statement.with_only_columns(order).where(col(VectorStoreFile.file_id) == cursor))
        ).scalar_one_or_none()
        if found is None:
            raise unknown_cursor(name, cursor)
        later = (name == "after") != descending
        statement = statement.where(order > found if later else order < found)
    backwards = params.before is not None and params.after is None
    ascending = descending == backwards
    statement = statement.order_by(order.asc() if ascending else order.desc()).limit(params.limit + 1)
    rows = list((await session.execute(statement)).scalars())
    has_more = len(rows) > params.limit
    rows = rows[: params.limit]
    if backwards:
        rows.reverse()
    return Page(
        data=[file_public(row) for row in rows],
        first_id=rows[0].file_id if rows else None,
        last_id=rows[-1].file_id if rows else None,
        has_more=has_more,
    )


async def set_attributes(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, file_id: str, attributes: dict[str, Any] | None
) -> VectorStoreFilePublic:
    row = await repository.store_file_row(session, scope, vector_store_id, file_id)
    row.attributes = dict(attributes or {})
    row.updated_at = utc_now()
    store = await repository.store_row(session, scope, vector_store_id)
    store.revision += 1  # searches filtered by attributes change
    await session.flush()
    return file_public(row)


async def detach(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, file_id: str
) -> VectorStoreFileDeleted:
    """Detach the file: its chunks go, the file stays in ``/v1/files``. An ingestion of it still running stores
    nothing more (its next batch finds the attachment gone)."""
    row = await repository.store_file_row(session, scope, vector_store_id, file_id)
    await remove_chunks(session, scope, vector_store_id, file_id)
    await session.delete(row)
    await session.flush()
    return VectorStoreFileDeleted(id=file_id)


async def file_content(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, file_id: str
) -> FileContentPage:
    """The file's chunks as stored, in order (neighbours overlap by the strategy's overlap)."""
    await repository.store_file_row(session, scope, vector_store_id, file_id)
    texts = await session.execute(
        select(col(KnowledgeChunk.text))
        .where(
            col(KnowledgeChunk.tenant_id) == scope.tenant_id,
            col(KnowledgeChunk.vector_store_id) == vector_store_id,
            col(KnowledgeChunk.file_id) == file_id,
        )
        .order_by(col(KnowledgeChunk.position))
    )
    return FileContentPage(data=[FileContentPart(text=text) for text in texts.scalars()])


async def cancel_batch(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, batch_id: str
) -> FileBatchPublic:
    """Cancel the batch's files still in progress (their chunks so far go); files done stay done."""
    batch = await repository.batch_row(session, scope, vector_store_id, batch_id)
    if batch.status == "in_progress":
        pending = (
            await session.execute(
                select(col(VectorStoreFile.file_id)).where(
                    col(VectorStoreFile.tenant_id) == scope.tenant_id,
                    col(VectorStoreFile.batch_id) == batch_id,
                    col(VectorStoreFile.status) == "in_progress",
                )
            )
        ).scalars()
        for file_id in list(pending):
            await remove_chunks(session, scope, vector_store_id, file_id)
        await session.execute(
            update(VectorStoreFile)
            .where(
                col(VectorStoreFile.tenant_id) == scope.tenant_id,
                col(VectorStoreFile.batch_id) == batch_id,
                col(VectorStoreFile.status) == "in_progress",
            )
            .values(status="cancelled", usage_bytes=0, lease_owner=None, lease_expires_at=None, updated_at=utc_now())
            .execution_options(synchronize_session=False)
        )
        batch.status = "cancelled"
        await session.flush()
    counts = await repository.file_counts(session, scope, [vector_store_id], batch_id=batch_id)
    return batch_public(batch, counts[vector_store_id])
