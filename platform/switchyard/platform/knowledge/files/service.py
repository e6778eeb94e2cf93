"""Files: upload (bounded per file and per tenant), list, read, read the bytes, delete.

A file's row (``files``) and its bytes (``file_contents``) are apart, so listing reads no bytes. Deleting a file
removes its bytes and keeps its row, marked deleted (chunks and attachments name it), after detaching it from every
vector store it is in, as OpenAI does: its chunks go and each store's ``usage_bytes`` and ``revision`` follow.

An expired file (``expires_at`` passed) is gone to every reader at once; its bytes are removed, as a deletion's are,
by the ``files.expire`` job (every minute) or the tenant's next upload, whichever comes first (an upload must count
only live files against the quota).

The tenant's quota is exact under concurrent uploads: on PostgreSQL an advisory lock per tenant serializes them for
the rest of the request's transaction; on SQLite the new row is written first (which takes the database's write
lock) and the total is read after it, in the same transaction.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass
from datetime import timedelta

from litestar.datastructures import UploadFile
from sqlalchemy import ColumnElement, delete, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.audit.service import record
from switchyard.platform.auth.principal import Actor
from switchyard.platform.db import UNSCOPED, Database, TenantScope, new_id
from switchyard.platform.http.errors import ApiError, InvalidRequest, NotFound
from switchyard.platform.http.pagination import CursorParams, Page, paginate
from switchyard.platform.knowledge.chunks import remove_chunks
from switchyard.platform.knowledge.files.schemas import (
    MAX_EXPIRES_AFTER_SECONDS,
    FileDeleted,
    FilePublic,
    FileUpload,
)
from switchyard.platform.models import FileContent, StoredFile, VectorStoreFile, utc_now

__all__ = [
    "FileContentAnswer",
    "FileLimits",
    "FileTooLarge",
    "create_file",
    "delete_file",
    "erase_expired_files",
    "file_content",
    "file_row",
    "get_file",
    "list_files",
    "new_file_id",
]

TARGET = "file"
MAX_FILENAME_CHARS = 512
"""The ``files.filename`` column's length."""
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")


class FileTooLarge(ApiError):
    """413: the file, or the tenant's files with it, would pass a limit; ``param`` is ``file``."""

    status_code = 413


@dataclass(frozen=True, slots=True)
class FileLimits:
    """The settings an upload is held to."""

    max_file_bytes: int
    max_tenant_bytes: int


@dataclass(frozen=True, slots=True)
class FileContentAnswer:
    """A file's bytes and its name."""

    data: bytes
    filename: str


def new_file_id() -> str:
    """``file-`` and 26 characters of Crockford base32 (OpenAI's ids are ``file-<alphanumerics>``); time-ordered
    like every id here, so cursors page them in creation order."""
    return "file-" + new_id("file").partition("_")[2]


async def create_file(
    session: AsyncSession, *, scope: TenantScope, actor: Actor, upload: FileUpload, limits: FileLimits
) -> FilePublic:
    """Store the uploaded file whole; 413 past ``limits`` (nothing stored), 400 for a name the server cannot keep."""
    data = await _read_bounded(upload.file, limits.max_file_bytes)
    filename = _filename(upload.file.filename)
    sha256 = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())  # ~30 ms for 32 MiB
    now = utc_now()
    seconds = upload.expires_after_seconds
    if seconds is None and upload.purpose == "batch":
        seconds = MAX_EXPIRES_AFTER_SECONDS  # OpenAI's default for batch files: 30 days
    row = StoredFile(
        id=new_file_id(),
        tenant_id=scope.tenant_id,
        filename=filename,
        purpose=upload.purpose,
        bytes=len(data),
        content_type=_media_type(upload.file.content_type),
        sha256=sha256,
        created_at=now,
        expires_at=now + timedelta(seconds=seconds) if seconds is not None else None,
    )
    await _lock_tenant_files(session, scope)
    await _remove_expired(session, scope)
    session.add(row)
    await session.flush()  # the file row first: file_contents refers to it
    session.add(FileContent(file_id=row.id, tenant_id=scope.tenant_id, data=data))
    await session.flush()
    stored = await _stored_bytes(session, scope)
    if stored > limits.max_tenant_bytes:  # the request's transaction rolls back: nothing stays
        raise FileTooLarge(
            f"this file ({len(data):,} bytes) would bring the tenant's files to {stored:,} bytes, past the "
            f"{limits.max_tenant_bytes:,} it may keep (SWITCHYARD_MAX_TENANT_FILE_BYTES); delete files first",
            param="file",
            code="file_storage_exceeded",
        )
    details = {"filename": filename, "purpose": row.purpose, "bytes": row.bytes, "sha256": sha256}
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="file.create",
        target_type=TARGET,
        target_id=row.id,
        details=details,
    )
    return FilePublic.of(row)


async def list_files(
    session: AsyncSession, *, scope: TenantScope, purpose: str | None, params: CursorParams
) -> Page[FilePublic]:
    """The tenant's live files (not deleted, not expired), newest first unless ``order=asc``."""
    statement = select(StoredFile).where(*_live(scope))
    if purpose is not None:
        statement = statement.where(col(StoredFile.purpose) == purpose)
    return await paginate(session, statement, col(StoredFile.id), params, FilePublic.of)


async def file_row(session: AsyncSession, scope: TenantScope, file_id: str, *, param: str = "file_id") -> StoredFile:
    """The tenant's live file; 404 naming ``param`` for a deleted or expired one, or another tenant's."""
    statement = select(StoredFile).where(*_live(scope), col(StoredFile.id) == file_id)
    row = (await session.execute(statement)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no file {file_id!r}", param=param)
    return row


async def get_file(session: AsyncSession, *, scope: TenantScope, file_id: str) -> FilePublic:
    return FilePublic.of(await file_row(session, scope, file_id))


async def file_content(session: AsyncSession, *, scope: TenantScope, file_id: str) -> FileContentAnswer:
    row = await file_row(session, scope, file_id)
    statement = select(col(FileContent.data)).where(
        col(FileContent.tenant_id) == scope.tenant_id, col(FileContent.file_id) == file_id
    )
    data = (await session.execute(statement)).scalar_one()
    return FileContentAnswer(data=data, filename=row.filename)


async def delete_file(session: AsyncSession, *, scope: TenantScope, actor: Actor, file_id: str) -> FileDeleted:
    """Detach the file from every vector store, remove its bytes and mark it deleted."""
    row = await file_row(session, scope, file_id)
    stores = await _erase(session, scope, row)
    details = {"filename": row.filename, "bytes": row.bytes, "vector_store_ids": stores}
    record(
        session,
        tenant_id=scope.tenant_id,
        actor=actor,
        action="file.delete",
        target_type=TARGET,
        target_id=row.id,
        details=details,
    )
    await session.flush()
    return FileDeleted(id=row.id)


async def _erase(session: AsyncSession, scope: TenantScope, row: StoredFile) -> list[str]:
    """Detach ``row`` from its vector stores (chunks, attachments), delete its bytes and mark it deleted; the ids of
    the stores it was in."""
    attached = select(col(VectorStoreFile.vector_store_id)).where(
        col(VectorStoreFile.tenant_id) == scope.tenant_id, col(VectorStoreFile.file_id) == row.id
    )
    stores = sorted((await session.execute(attached)).scalars())
    for store_id in stores:
        await remove_chunks(session, scope, store_id, row.id)
    await session.execute(
        delete(VectorStoreFile)
        .where(col(VectorStoreFile.tenant_id) == scope.tenant_id, col(VectorStoreFile.file_id) == row.id)
        .execution_options(synchronize_session=False)
    )
    await session.execute(
        delete(FileContent)
        .where(col(FileContent.tenant_id) == scope.tenant_id, col(FileContent.file_id) == row.id)
        .execution_options(synchronize_session=False)
    )
    row.deleted_at = utc_now()
    return stores


def _live(scope: TenantScope) -> list[ColumnElement[bool]]:
    now = utc_now()
    return [
        col(StoredFile.tenant_id) == scope.tenant_id,
        col(StoredFile.deleted_at).is_(None),
        or_(col(StoredFile.expires_at).is_(None), col(StoredFile.expires_at) > now),
    ]


async def erase_expired_files(database: Database, *, tenants_at_once: int = 100) -> int:
    """Erase every tenant's files whose time has passed (the ``files.expire`` job); how many. Each tenant's in its
    own transaction, serialized with its uploads."""
    async with database.unit_of_work(UNSCOPED) as session:
        statement = (
            select(col(StoredFile.tenant_id))
            .where(col(StoredFile.deleted_at).is_(None), col(StoredFile.expires_at) <= utc_now())
            .distinct()
            .limit(tenants_at_once)
        )
        tenant_ids = list((await session.execute(statement)).scalars())
    erased = 0
    for tenant_id in tenant_ids:
        scope = TenantScope(tenant_id)
        async with database.unit_of_work(scope) as session:
            await _lock_tenant_files(session, scope)
            erased += await _remove_expired(session, scope)
    return erased


async def _remove_expired(session: AsyncSession, scope: TenantScope) -> int:
    """Erase the tenant's files whose time has passed (readers already see none of them); how many."""
    statement = select(StoredFile).where(
        col(StoredFile.tenant_id) == scope.tenant_id,
        col(StoredFile.deleted_at).is_(None),
        col(StoredFile.expires_at) <= utc_now(),
    )
    rows = (await session.execute(statement)).scalars().all()
    for row in rows:
        await _erase(session, scope, row)
    return len(rows)


async def _stored_bytes(session: AsyncSession, scope: TenantScope) -> int:
    statement = select(func.coalesce(func.sum(col(StoredFile.bytes)), 0)).where(
        col(StoredFile.tenant_id) == scope.tenant_id, col(StoredFile.deleted_at).is_(None)
    )
    return int((await session.execute(statement)).scalar_one())


async def _lock_tenant_files(session: AsyncSession, scope: TenantScope) -> None:
    """Serialize the tenant's uploads until the transaction ends (PostgreSQL; SQLite's write lock does it there)."""
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"files:{scope.tenant_id}"})


async def _read_bounded(upload: UploadFile, max_bytes: int) -> bytes:
    """The upload's bytes (its spooled copy closed); 413 ``file_too_large`` past ``max_bytes``."""
    try:
        data = await upload.read(max_bytes + 1)
    finally:
        await upload.close()
    if len(data) > max_bytes:
        raise FileTooLarge(
            f"the file is larger than the {max_bytes:,} bytes a file may have (SWITCHYARD_MAX_FILE_BYTES)",
            param="file",
            code="file_too_large",
        )
    return data


def _filename(name: str) -> str:
    """The part's filename as stored: text PostgreSQL can keep, within the column."""
    if "\x00" in name:
        raise InvalidRequest(
            "file: the filename may not contain the NUL character (U+0000)", param="file", code="invalid_value"
        )
    if not name.strip():
        raise InvalidRequest("file: the part needs a filename", param="file", code="invalid_value")
    if len(name) > MAX_FILENAME_CHARS:
        raise InvalidRequest(
            f"file: the filename is longer than {MAX_FILENAME_CHARS} characters", param="file", code="invalid_value"
        )
    return name


def _media_type(declared: str | None) -> str | None:
    """The part's ``type/subtype`` when it is one (parameters such as ``charset`` dropped), else ``None``."""
    essence = (declared or "").split(";", 1)[0].strip().lower()
    return essence if _MEDIA_TYPE.fullmatch(essence) else None
