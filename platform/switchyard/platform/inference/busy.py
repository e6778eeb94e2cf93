"""Recording fleet busy time where the replicas run (every second), for reconciliation.

Every process that runs replicas records their busy chip-µs: the fleet process (``switchyard fleet``) its
simulated deployments, API processes and workers the real upstreams they call (and simulated deployments only
when no fleet process is configured: tests, one-process use). Each replica's counters are cumulative in memory;
``FleetBusyRecorder.flush`` adds the increase since its last successful flush to the row of the current UTC
minute (``billing.fleet.record_fleet_busy``), in one transaction, so an increment is stored once or, when the
transaction fails, carried to the next flush. A process killed with ``kill -9`` loses at most what it computed
since its last flush (one second).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from switchyard.platform.billing.fleet import minute_of, record_fleet_busy
from switchyard.platform.db import UNSCOPED, Database
from switchyard.platform.models import utc_now

__all__ = ["BusySource", "Counters", "FleetBusyRecorder"]

log = logging.getLogger(__name__)

Counters = Callable[[], dict[str, tuple[str, int]]]
"""Cumulative chip-µs since start, ``{replica: (instance type, chip-µs)}``."""


class BusySource(Protocol):
    """What runs replicas: an ``AcceleratorPool``."""

    def busy_chip_us(self) -> dict[str, tuple[str, int]]: ...


class FleetBusyRecorder:
    """Records the increase of each watched counter every ``every_s``: replicas' busy chip-µs, and the part of
    them whose receipt no gateway received."""

    def __init__(self, database: Database, *, every_s: float = 1.0, clock: Callable[[], datetime] = utc_now) -> None:
        self._database = database
        self._every_s = every_s
        self._clock = clock
        self._watched: dict[int, tuple[object, Counters | None, Counters | None]] = {}
        self._recorded: dict[tuple[int, str], tuple[int, int]] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def watch(self, source: BusySource) -> None:
        """Record the busy time of ``source``'s replicas from now on (a pool)."""
        self._watched[id(source)] = (source, source.busy_chip_us, None)

    def watch_undelivered(self, owner: object, undelivered: Counters) -> None:
        """Record ``undelivered``: compute already counted as busy whose receipt never reached a gateway."""
        self._watched[id(owner)] = (owner, None, undelivered)

    async def retire(self, source: object) -> None:
        """Record what ``source`` computed since the last flush, then stop watching it (a replaced pool)."""
        await self.flush()
        self._watched.pop(id(source), None)
        for key in [k for k in self._recorded if k[0] == id(source)]:
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
        """Record every increase since the last successful flush; returns the busy chip-µs recorded."""
        async with self._lock:
            increments = list(self._increments())
            if not increments:
                return 0
            minute = minute_of(self._clock())
            async with self._database.unit_of_work(UNSCOPED) as session:
                for _key, replica, instance_type, busy, undelivered, _totals in increments:
                    await record_fleet_busy(
                        session,
                        replica=replica,
                        instance_type=instance_type,
                        chip_us=busy,
                        undelivered_chip_us=undelivered,
                        period_start=minute,
                    )
            for key, *_rest, totals in increments:
                self._recorded[key] = totals
            return sum(busy for _key, _replica, _instance, busy, _undelivered, _totals in increments)

    def _increments(self) -> Iterable[tuple[tuple[int, str], str, str, int, int, tuple[int, int]]]:
        for owner_id, (_owner, busy, undelivered) in self._watched.items():
            totals: dict[str, tuple[str, int, int]] = {}
            for replica, (instance_type, chip_us) in (busy() if busy is not None else {}).items():
                totals[replica] = (instance_type, chip_us, 0)
            for replica, (instance_type, chip_us) in (undelivered() if undelivered is not None else {}).items():
                totals[replica] = (instance_type, totals.get(replica, (instance_type, 0, 0))[1], chip_us)
            for replica, (instance_type, busy_total, lost_total) in totals.items():
                key = (owner_id, replica)
                seen_busy, seen_lost = self._recorded.get(key, (0, 0))
                if busy_total > seen_busy or lost_total > seen_lost:
                    increment = (busy_total - seen_busy, lost_total - seen_lost)
                    yield key, replica, instance_type, *increment, (busy_total, lost_total)
