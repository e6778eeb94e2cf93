"""The lease a process holds on a run or a response while it drives it: extended while it works, released when
the work pauses or ends; a process that dies stops extending it, and the recovery job hands the work on.

A job whose model call must wait (a rate, a request slot) is *put aside* (:func:`postpone`): no process holds it
(``lease_owner`` is null) and none may take it before ``lease_expires_at``. Its worker sends it again for then;
should that message be lost, the recovery job finds it as it finds a lease that passed."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.platform.db import Database, TenantScope
from switchyard.platform.models import utc_now

__all__ = ["cancel_flag", "heartbeat", "holder", "postpone", "release", "take"]

log = logging.getLogger(__name__)


def holder(worker_id: str) -> str:
    """A lease holder's name for one execution in ``worker_id``'s process: two executions of the same run in one
    process (a run dispatched twice at once) are two holders, so only one of them takes the lease."""
    return f"{worker_id}#{secrets.token_hex(4)}"


def _held(table: Any, scope: TenantScope, row_id: str, owner: str) -> Any:
    """An update of the row, if ``owner`` still holds its lease."""
    return update(table).where(
        col(table.tenant_id) == scope.tenant_id, col(table.id) == row_id, col(table.lease_owner) == owner
    )


async def take(
    session: AsyncSession, scope: TenantScope, table: Any, row: Any, owner: str, values: dict[str, Any]
) -> bool:
    """Take ``row``'s lease for ``owner`` (a ``holder``), writing ``values`` (its new ``lease_expires_at`` among
    them) with it, if the row is still at its revision and its lease is free or passed; then refresh ``row``."""
    now = utc_now()
    taken = await session.execute(
        update(table)
        .where(
            col(table.tenant_id) == scope.tenant_id,
            col(table.id) == row.id,
            col(table.revision) == row.revision,
            or_(col(table.lease_expires_at).is_(None), col(table.lease_expires_at) < now),
        )
        .values({"lease_owner": owner, **values})
        .execution_options(synchronize_session=False)
    )
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        return False
    await session.refresh(row)
    return True


def cancel_flag(database: Database, scope: TenantScope, table: Any, row_id: str) -> Callable[[], Awaitable[bool]]:
    """Reads the row's ``cancel_requested`` (the driver polls it between transitions)."""

    async def cancel_requested() -> bool:
        async with database.unit_of_work(scope) as session:
            statement = select(col(table.cancel_requested)).where(
                col(table.tenant_id) == scope.tenant_id, col(table.id) == row_id
            )
            return bool((await session.execute(statement)).scalar_one())

    return cancel_requested


async def heartbeat(
    database: Database, scope: TenantScope, table: Any, row_id: str, owner: str, lease_s: float
) -> None:
    """Extend the lease every third of its length (a long model call must not look like a dead worker)."""
    while True:
        await asyncio.sleep(lease_s / 3)
        try:
            async with database.unit_of_work(scope) as session:
                await session.execute(
                    _held(table, scope, row_id, owner)
                    .values(lease_expires_at=utc_now() + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False)
                )
        except Exception:  # the next beat, or the checkpoints, extend it
            log.warning("could not extend the lease of %s", row_id, exc_info=True)


async def release(database: Database, scope: TenantScope, table: Any, row_id: str, owner: str) -> None:
    async with database.unit_of_work(scope) as session:
        await session.execute(
            _held(table, scope, row_id, owner)
            .values(lease_owner=None, lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )


async def postpone(
    database: Database, scope: TenantScope, table: Any, row_id: str, owner: str, until: datetime
) -> None:
    """Give the lease back, letting no process take the row before ``until`` (it waits for admission)."""
    async with database.unit_of_work(scope) as session:
        await session.execute(
            _held(table, scope, row_id, owner)
            .values(lease_owner=None, lease_expires_at=until)
            .execution_options(synchronize_session=False)
        )
