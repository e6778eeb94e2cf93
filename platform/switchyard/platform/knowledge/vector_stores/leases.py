"""The lease on an attached file while a process ingests it, and finding the files no process is ingesting.

A process takes a file's lease (``lease_owner``, ``lease_expires_at`` on its ``vector_store_files`` row) if the
file is in progress and its lease is free or passed; extends it while it works; gives it back when it stops, or
*sets the file aside* (no holder, not to be taken before a time) when admission asks it to wait. Every write of the
ingestion is conditional on still holding it (:func:`held`), so a process that lost its lease (it was too slow,
the file was cancelled or detached) stores nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.knowledge.chunks import remove_chunks
from switchyard.platform.models import VectorStoreFile, utc_now

__all__ = ["fail", "file_row", "files_to_recover", "heartbeat", "held", "release", "release_quietly", "take"]

log = logging.getLogger(__name__)


def held(scope: TenantScope, row_id: str, owner: str) -> Any:
    """An update of the file's row, if ``owner`` still holds its lease and it is still in progress."""
    return update(VectorStoreFile).where(
        col(VectorStoreFile.tenant_id) == scope.tenant_id,
        col(VectorStoreFile.row_id) == row_id,
        col(VectorStoreFile.lease_owner) == owner,
        col(VectorStoreFile.status) == "in_progress",
    )


async def file_row(session: AsyncSession, scope: TenantScope, row_id: str) -> VectorStoreFile | None:
    statement = select(VectorStoreFile).where(
        col(VectorStoreFile.tenant_id) == scope.tenant_id, col(VectorStoreFile.row_id) == row_id
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def take(database: Database, scope: TenantScope, row_id: str, owner: str, lease_s: float) -> bool:
    """Take the file's lease if it is in progress and its lease is free or passed."""
    now = utc_now()
    async with database.unit_of_work(scope) as session:
        taken = await session.execute(
            update(VectorStoreFile)
            .where(
                col(VectorStoreFile.tenant_id) == scope.tenant_id,
                col(VectorStoreFile.row_id) == row_id,
                col(VectorStoreFile.status) == "in_progress",
                or_(col(VectorStoreFile.lease_expires_at).is_(None), col(VectorStoreFile.lease_expires_at) < now),
            )
            .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
            .execution_options(synchronize_session=False)
        )
        return taken.rowcount == 1  # type: ignore[attr-defined,no-any-return]


async def heartbeat(database: Database, scope: TenantScope, row_id: str, owner: str, lease_s: float) -> None:
    """Extend the lease every third of its length (a long parse or call must not look like a dead worker)."""
    while True:
        await asyncio.sleep(lease_s / 3)
        try:
            async with database.unit_of_work(scope) as session:
                await session.execute(
                    held(scope, row_id, owner)
                    .values(lease_expires_at=utc_now() + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False)
                )
        except Exception:  # the next beat, or the batch commits, extend it
            log.warning("could not extend the lease of vector store file %s", row_id, exc_info=True)


async def release(database: Database, scope: TenantScope, row_id: str, owner: str, *, until_s: float = 0.0) -> None:
    """Give the lease back; with ``until_s``, let no process take the file before then (set aside)."""
    until = utc_now() + timedelta(seconds=until_s) if until_s else None
    async with database.unit_of_work(scope) as session:
        await session.execute(
            held(scope, row_id, owner)
            .values(lease_owner=None, lease_expires_at=until)
            .execution_options(synchronize_session=False)
        )


async def release_quietly(database: Database, scope: TenantScope, row_id: str, owner: str) -> None:
    try:
        await release(database, scope, row_id, owner)
    except Exception:  # the lease passes by itself
        log.warning("could not release the lease of vector store file %s", row_id, exc_info=True)


async def fail(database: Database, scope: TenantScope, row_id: str, owner: str, code: str, message: str) -> None:
    """Mark the file failed with ``last_error`` and remove the chunks it stored so far."""
    async with database.unit_of_work(scope) as session:
        row = await file_row(session, scope, row_id)
        if row is None or row.lease_owner != owner or row.status != "in_progress":
            return
        await remove_chunks(session, scope, row.vector_store_id, row.file_id)
        row.status = "failed"
        row.last_error = {"code": code, "message": message[:1000]}
        row.usage_bytes = 0
        row.lease_owner = None
        row.lease_expires_at = None
        row.updated_at = utc_now()
    log.info("vector store file %s failed: %s (%s)", row_id, code, message)


async def files_to_recover(database: Database, *, grace_s: float, limit: int = 1000) -> list[tuple[str, str]]:
    """``(tenant_id, row id)`` of files in progress that no process is ingesting: their worker died (the lease
    passed), they were set aside and their time came, or their job was never taken ``grace_s`` after they were
    attached (a lost send). Oldest first."""
    now = utc_now()
    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(
            select(col(VectorStoreFile.tenant_id), col(VectorStoreFile.row_id))
            .where(
                col(VectorStoreFile.status) == "in_progress",
                or_(
                    col(VectorStoreFile.lease_expires_at) < now,
                    and_(
                        col(VectorStoreFile.lease_expires_at).is_(None),
                        col(VectorStoreFile.updated_at) < now - timedelta(seconds=grace_s),
                    ),
                ),
            )
            .order_by(col(VectorStoreFile.row_id))
            .limit(limit)
        )
        return [(tenant_id, row_id) for tenant_id, row_id in rows.all()]
