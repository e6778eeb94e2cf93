"""Recording fleet busy time and receipts where the replicas run (every second), for reconciliation.

Every process that runs replicas records their busy chip-µs and the receipts they issued: the fleet process
(``switchyard fleet``) for its simulated deployments, API processes and workers for the real upstreams they call
(and for simulated deployments only when no fleet process is configured: tests, one-process use). Busy counters
are cumulative in memory; ``FleetBusyRecorder.flush`` adds the increase since its last successful flush to the
row of the current UTC minute (``billing.fleet.record_fleet_busy``) and stores the receipts issued meanwhile, in
one transaction: everything is stored once or, when the transaction fails, carried to the next flush. On SQLite
that transaction runs inline on the loop's thread (``db.inline``), as the gateway's metering does, so it never holds
the write lock while the loop serves requests. A process
killed with ``kill -9`` loses at most what it computed and issued since its last flush (one second).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from switchyard.accelerator.pool import AcceleratorPool, ComputeReceipt
from switchyard.platform.billing.fleet import (
    BusyIncrement,
    ReceiptRow,
    minute_of,
    record_fleet_busy,
    record_fleet_receipts,
    record_fleet_sync,
)
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.models import utc_now

__all__ = ["BusyCounters", "FleetBusyRecorder", "ReceiptSource"]

log = logging.getLogger(__name__)

BusyCounters = Callable[[], dict[str, tuple[str, int]]]
"""Cumulative busy chip-µs since start, ``{replica: (instance type, chip-µs)}``: a pool's ``busy_chip_us``."""

ReceiptSource = Callable[[], list[tuple[ComputeReceipt, float]]]
"""Receipts issued since the last call, with epoch times: a pool's (or the fleet server's) ``take_receipts``."""


class FleetBusyRecorder:
    """Records what the watched replicas computed every ``every_s``: busy chip-µs and issued receipts."""

    def __init__(self, database: Database, *, every_s: float = 1.0, clock: Callable[[], datetime] = utc_now) -> None:
        self._database = database
        self._every_s = every_s
        self._clock = clock
        self._watched: dict[int, tuple[object, BusyCounters | None, ReceiptSource | None]] = {}
        self._recorded: dict[tuple[int, str], int] = {}
        self._receipts: list[ReceiptRow] = []  # taken, not yet stored
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def watch(self, owner: object, *, busy: BusyCounters | None = None, receipts: ReceiptSource | None = None) -> None:
        """Record ``busy`` and ``receipts`` of ``owner`` (a pool; the fleet server for the fleet's receipts)."""
        self._watched[id(owner)] = (owner, busy, receipts)

    def watch_pool(self, pool: AcceleratorPool) -> None:
        """Record the busy time and receipts of the replicas ``pool`` runs in this process."""
        self.watch(pool, busy=pool.busy_chip_us, receipts=pool.take_receipts)

    async def retire(self, owner: object) -> None:
        """Record what ``owner`` computed since the last flush, then stop watching it (a replaced pool)."""
        await self.flush()
        self._watched.pop(id(owner), None)
        for key in [k for k in self._recorded if k[0] == id(owner)]:
            del self._recorded[key]

    def start(self) -> None:
        """Flush periodically on the running loop until ``stop``."""
        self._task = asyncio.get_running_loop().create_task(self._periodically())

    async def stop(self) -> None:
        """Stop flushing periodically, and record what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def _periodically(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            try:
                await self.flush()
            except Exception:
                log.warning("could not record fleet busy time; the next flush carries it", exc_info=True)

    async def flush(self) -> int:
        """Record every increase since the last successful flush, and the receipts issued meanwhile; returns the
        busy chip-µs recorded."""
        async with self._lock:
            increments = list(self._increments())
            self._receipts += self._taken_receipts()
            if not increments and not self._receipts:
                return 0
            minute = minute_of(self._clock())
            busy = [(replica, instance_type, chip_us) for _key, replica, instance_type, chip_us, _total in increments]
            if not self._write_inline(busy, minute):
                async with self._database.unit_of_work(UNSCOPED) as session:
                    for replica, instance_type, chip_us in busy:
                        await record_fleet_busy(
                            session, replica=replica, instance_type=instance_type, chip_us=chip_us, period_start=minute
                        )
                    await record_fleet_receipts(session, self._receipts)
            self._receipts = []
            for key, *_rest, total in increments:
                self._recorded[key] = total
            return sum(chip_us for _key, _replica, _instance, chip_us, _total in increments)

    def _write_inline(self, busy: list[BusyIncrement], minute: datetime) -> bool:
        """On SQLite, record in one short transaction on the loop's thread (``db.inline``): a transaction through
        aiosqlite's thread would hold the database's write lock across turns of a busy loop, and every request
        metered meanwhile would wait for it. ``False``: not written (another process holds the lock, or not SQLite)."""
        inline = self._database.inline
        receipts = self._receipts
        return inline is not None and inline.write(lambda c: record_fleet_sync(c, busy, receipts, minute))

    def _increments(self) -> Iterable[tuple[tuple[int, str], str, str, int, int]]:
        for owner_id, (_owner, busy, _receipts) in self._watched.items():
            for replica, (instance_type, total) in (busy() if busy is not None else {}).items():
                key = (owner_id, replica)
                seen = self._recorded.get(key, 0)
                if total > seen:
                    yield key, replica, instance_type, total - seen, total

    def _taken_receipts(self) -> list[ReceiptRow]:
        rows: list[ReceiptRow] = []
        for _owner, _busy, receipts in self._watched.values():
            for receipt, at in receipts() if receipts is not None else ():
                finished_at = datetime.fromtimestamp(at, UTC)
                rows.append(
                    (
                        receipt.tenant,
                        receipt.request_id,
                        receipt.replica,
                        receipt.instance_type,
                        receipt.chip_us,
                        finished_at,
                    )
                )
        return rows
