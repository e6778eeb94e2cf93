"""Group commit of finished requests: usage events and budget settlements, many requests per transaction.

A request's response is released only after its usage event is committed (the outbox): if the process dies
first, the client gets no answer and nothing is billed; once the client has the answer, the usage is durable.
Batching only changes how many requests share one transaction, never whether a request is metered.

On SQLite, receipts with no budget reservation are committed inline, on the loop's thread (``db.inline``):
those that finish in one turn of the event loop share one small transaction, without aiosqlite's thread hops;
when another writer holds the lock they join the ordinary batch instead. On PostgreSQL, a batch with no budget
reservation is one ``INSERT`` on a kept connection (``db.direct``), and goes through a session if that fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from switchyard.platform.billing import budgets
from switchyard.platform.billing.ledger import (
    UsageEventCreate,
    record_usage_bulk,
    record_usage_direct,
    record_usage_sync,
)
from switchyard.platform.db import UNSCOPED, Database, TenantScope

__all__ = ["MeterBatcher", "Metering"]

log = logging.getLogger(__name__)
MAX_BATCH = 256


@dataclass(frozen=True, slots=True)
class Metering:
    scope: TenantScope
    event: UsageEventCreate
    reservation_id: str | None


class MeterBatcher:
    def __init__(self, database: Database, on_commit: Callable[[], None] | None = None) -> None:
        """``on_commit`` is called on the loop after each committed batch (to ask for the usage's rating)."""
        self._database = database
        self._on_commit = on_commit
        self._pending: list[tuple[Metering, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None
        self._inline: list[tuple[Metering, asyncio.Future[None]]] = []

    async def write(self, metering: Metering) -> None:
        """Return once ``metering`` is committed (raises if its transaction failed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if self._database.inline is not None and metering.reservation_id is None:
            self._inline.append((metering, future))
            if len(self._inline) == 1:
                loop.call_soon(self._flush_inline)
        else:
            self._enqueue([(metering, future)])
        await future

    def _enqueue(self, items: list[tuple[Metering, asyncio.Future[None]]]) -> None:
        self._pending += items
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    def _flush_inline(self) -> None:
        batch, self._inline = self._inline, []
        inline = self._database.inline
        assert inline is not None
        try:
            written = inline.write(
                lambda connection: record_usage_sync(connection, [(m.scope, m.event) for m, _ in batch])
            )
        except Exception as exc:
            log.exception("metering %d requests inline failed", len(batch))
            _settle(batch, exc)
            return
        if written:
            self._committed(batch)
        else:  # another writer holds the lock: wait for it on the ordinary path
            self._enqueue(batch)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            if await self._write_direct(batch):
                self._committed(batch)
                continue
            try:
                async with self._database.unit_of_work(UNSCOPED) as session:
                    by_tenant: dict[TenantScope, list[UsageEventCreate]] = {}
                    for item, _future in batch:
                        by_tenant.setdefault(item.scope, []).append(item.event)
                    for scope, events in by_tenant.items():
                        await record_usage_bulk(session, scope=scope, events=events)
                    for item, _future in batch:
                        if item.reservation_id:
                            await budgets.settle(
                                session,
                                scope=item.scope,
                                reservation_id=item.reservation_id,
                                actual_chip_us=item.event.chip_us,
                            )
            except Exception as exc:
                log.exception("metering a batch of %d requests failed", len(batch))
                _settle(batch, exc)
                continue
            self._committed(batch)

    async def _write_direct(self, batch: list[tuple[Metering, asyncio.Future[None]]]) -> bool:
        """On PostgreSQL, a batch with no budget to settle is one statement on the kept connection (``db.direct``);
        ``False`` (the batch is for the ordinary path) if it has one or the write failed."""
        direct = self._database.direct
        if direct is None or any(item.reservation_id for item, _ in batch):
            return False
        try:
            await record_usage_direct(direct, [(item.scope, item.event) for item, _ in batch])
        except Exception:
            log.warning(
                "metering %d requests on the kept connection failed; writing through a session",
                len(batch),
                exc_info=True,
            )
            return False
        return True

    def _committed(self, batch: list[tuple[Metering, asyncio.Future[None]]]) -> None:
        _settle(batch, None)
        if self._on_commit is not None:
            self._on_commit()


def _settle(batch: list[tuple[Metering, asyncio.Future[None]]], error: Exception | None) -> None:
    """Wake the writers of a batch: committed, or failed with ``error``."""
    for _item, future in batch:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
