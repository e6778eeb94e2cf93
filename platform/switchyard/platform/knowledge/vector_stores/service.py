"""Vector stores: create, list, modify, delete; which embedding model and chunk sizes a store uses; expiry.

A store is embedded by one model at one length (``embedding_model``, ``dimensions``), chosen at creation: the
default is ``SWITCHYARD_VECTOR_STORE_EMBEDDING_MODEL`` (empty: the first embedding deployment the tenant may use);
its files are chunked to fit that model (``policy``).

A store with ``expires_after`` expires ``days`` after it was last active (created, modified, files attached, or
searched: ``touch``); an expired store answers with ``status: expired`` and its files stay until it is deleted.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.accelerator.pool import AcceleratorPool
from switchyard.platform.db import TenantScope, new_id
from switchyard.platform.http.errors import InvalidRequest
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.jobs import JobSender
from switchyard.platform.knowledge.chunks import remove_chunks
from switchyard.platform.knowledge.vector_stores import repository
from switchyard.platform.knowledge.vector_stores.attachments import attach, batch_public, file_public
from switchyard.platform.knowledge.vector_stores.policy import (
    chunk_sizes,
    embedding_choice,
    input_limit,
    is_expired,
    set_expiry,
    touch,
)
from switchyard.platform.knowledge.vector_stores.schemas import (
    FileBatchCreate,
    FileBatchFile,
    FileBatchPublic,
    FileCounts,
    VectorStoreCreate,
    VectorStoreDeleted,
    VectorStoreFileCreate,
    VectorStoreFilePublic,
    VectorStorePublic,
    VectorStoreUpdate,
    unix,
)
from switchyard.platform.models import (
    VectorStore,
    VectorStoreFile,
    VectorStoreFileBatch,
    utc_now,
)

__all__ = [
    "add_file",
    "create_batch",
    "create_store",
    "delete_store",
    "get_batch",
    "get_file",
    "get_store",
    "list_stores",
    "modify_store",
    "store_public",
]


def store_public(row: VectorStore, counts: FileCounts) -> VectorStorePublic:
    status: Literal["expired", "in_progress", "completed"] = (
        "expired" if is_expired(row) else "in_progress" if counts.in_progress else "completed"
    )
    return VectorStorePublic(
        id=row.id,
        created_at=unix(row.created_at) or 0,
        name=row.name,
        usage_bytes=row.usage_bytes,
        file_counts=counts,
        status=status,
        expires_after=row.expires_after,
        expires_at=unix(row.expires_at),
        last_active_at=unix(row.last_active_at),
        metadata=dict(row.metadata_json or {}),
        embedding_model=row.embedding_model,
        dimensions=row.dimensions,
    )


async def _public(session: AsyncSession, scope: TenantScope, row: VectorStore) -> VectorStorePublic:
    counts = await repository.file_counts(session, scope, [row.id])
    return store_public(row, counts[row.id])


async def create_store(
    session: AsyncSession,
    *,
    scope: TenantScope,
    data: VectorStoreCreate,
    pool: AcceleratorPool,
    default_model: str,
    jobs: JobSender,
    api_key_id: str | None = None,
) -> VectorStorePublic:
    """A new store, its files attached and sent to be ingested once the request commits."""
    model, dimensions, max_input_tokens = embedding_choice(
        pool, scope.tenant_id, model=data.embedding_model, dimensions=data.dimensions, default_model=default_model
    )
    sizes = chunk_sizes(data.chunking_strategy, max_input_tokens)
    row = VectorStore(
        id=new_id("vs"),
        tenant_id=scope.tenant_id,
        name=data.name or "",
        embedding_model=model,
        dimensions=dimensions,
        chunking_strategy=sizes,
        expires_after=data.expires_after.model_dump() if data.expires_after else None,
        metadata_json=dict(data.metadata or {}),
    )
    touch(row)
    session.add(row)
    await session.flush()
    if data.file_ids:
        batch = VectorStoreFileBatch(id=new_id("vsfb"), tenant_id=scope.tenant_id, vector_store_id=row.id)
        session.add(batch)
        entries = [FileBatchFile(file_id=file_id) for file_id in dict.fromkeys(data.file_ids)]
        await attach(
            session,
            scope=scope,
            store=row,
            entries=entries,
            batch_id=batch.id,
            max_input_tokens=max_input_tokens,
            jobs=jobs,
            api_key_id=api_key_id,
            param="file_ids",
        )
    return await _public(session, scope, row)


async def get_store(session: AsyncSession, *, scope: TenantScope, vector_store_id: str) -> VectorStorePublic:
    return await _public(session, scope, await repository.store_row(session, scope, vector_store_id))


async def list_stores(session: AsyncSession, *, scope: TenantScope, params: CursorParams) -> Page[VectorStorePublic]:
    statement = select(VectorStore).where(
        col(VectorStore.tenant_id) == scope.tenant_id, col(VectorStore.deleted_at).is_(None)
    )
    page = await paginate(session, statement, col(VectorStore.id), params, lambda row: row)
    counts = await repository.file_counts(session, scope, [row.id for row in page.data])
    return Page(
        data=[store_public(row, counts[row.id]) for row in page.data],
        first_id=page.first_id,
        last_id=page.last_id,
        has_more=page.has_more,
    )


async def modify_store(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, data: VectorStoreUpdate
) -> VectorStorePublic:
    """Change the fields sent (``expires_after: null`` removes the policy; ``metadata`` replaces the old)."""
    row = await repository.store_row(session, scope, vector_store_id)
    sent = data.model_fields_set
    if "name" in sent:
        row.name = data.name or ""
    if "metadata" in sent:
        row.metadata_json = dict(data.metadata or {})
    if "expires_after" in sent:
        row.expires_after = data.expires_after.model_dump() if data.expires_after else None
        set_expiry(row)
    touch(row)
    await session.flush()
    return await _public(session, scope, row)


async def delete_store(session: AsyncSession, *, scope: TenantScope, vector_store_id: str) -> VectorStoreDeleted:
    """Delete the store, its chunks and its files' attachments (the files themselves stay in ``/v1/files``). An
    ingestion still running finds its file gone at its next batch and stops, storing nothing more."""
    row = await repository.store_row(session, scope, vector_store_id)
    await remove_chunks(session, scope, row.id, None)
    for table, column in (
        (VectorStoreFile, VectorStoreFile.vector_store_id),
        (VectorStoreFileBatch, VectorStoreFileBatch.vector_store_id),
    ):
        rows = (
            await session.execute(select(table).where(col(table.tenant_id) == scope.tenant_id, col(column) == row.id))
        ).scalars()
        for attached in rows:
            await session.delete(attached)
    row.deleted_at = utc_now()
    row.usage_bytes = 0
    await session.flush()
    return VectorStoreDeleted(id=row.id)


async def add_file(
    session: AsyncSession,
    *,
    scope: TenantScope,
    vector_store_id: str,
    data: VectorStoreFileCreate,
    pool: AcceleratorPool,
    jobs: JobSender,
    api_key_id: str | None = None,
) -> VectorStoreFilePublic:
    """Attach one file (or answer it as it is, attached already)."""
    store = await repository.store_row(session, scope, vector_store_id)
    entry = FileBatchFile(file_id=data.file_id, attributes=data.attributes, chunking_strategy=data.chunking_strategy)
    limit = input_limit(pool, store)
    (row,) = await attach(
        session,
        scope=scope,
        store=store,
        entries=[entry],
        batch_id=None,
        max_input_tokens=limit,
        jobs=jobs,
        api_key_id=api_key_id,
    )
    return file_public(row)


async def get_file(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, file_id: str
) -> VectorStoreFilePublic:
    await repository.store_row(session, scope, vector_store_id)
    return file_public(await repository.store_file_row(session, scope, vector_store_id, file_id))


async def create_batch(
    session: AsyncSession,
    *,
    scope: TenantScope,
    vector_store_id: str,
    data: FileBatchCreate,
    pool: AcceleratorPool,
    jobs: JobSender,
    api_key_id: str | None = None,
) -> FileBatchPublic:
    """Attach the batch's files (``file_ids`` or ``files``, not both; none makes a batch completed at once)."""
    if data.file_ids is not None and data.files is not None:
        raise InvalidRequest("give file_ids or files, not both", param="files")
    store = await repository.store_row(session, scope, vector_store_id)
    batch = VectorStoreFileBatch(id=new_id("vsfb"), tenant_id=scope.tenant_id, vector_store_id=store.id)
    session.add(batch)
    entries = list({entry.file_id: entry for entry in data.entries()}.values())
    limit = input_limit(pool, store)
    if data.chunking_strategy is not None:  # refused once, naming the batch's strategy
        chunk_sizes(data.chunking_strategy, limit)
    await attach(
        session,
        scope=scope,
        store=store,
        entries=entries,
        batch_id=batch.id,
        max_input_tokens=limit,
        jobs=jobs,
        api_key_id=api_key_id,
        param="file_ids" if data.files is None else "files",
    )
    counts = await repository.file_counts(session, scope, [store.id], batch_id=batch.id)
    return batch_public(batch, counts[store.id])


async def get_batch(
    session: AsyncSession, *, scope: TenantScope, vector_store_id: str, batch_id: str
) -> FileBatchPublic:
    await repository.store_row(session, scope, vector_store_id)
    batch = await repository.batch_row(session, scope, vector_store_id, batch_id)
    counts = await repository.file_counts(session, scope, [vector_store_id], batch_id=batch_id)
    return batch_public(batch, counts[vector_store_id])
