"""A tenant's share of a worker: at most ``tenant_worker_share`` of its slots drive one tenant's jobs at once.

Fair turns (``runs.turns``) decide which tenant a free slot serves next; they do not stop one tenant's backlog
from filling every slot whenever no other tenant's job is waiting. Its jobs then run as fast as the slots go, and
each one's model calls, events and books load the fleet process and the database that every tenant's requests
share: a flood of small background responses from one tenant tripled another tenant's p99 chat latency. So a
tenant holds at most its share of each worker's slots (at least one); the others stay free for other tenants,
whether or not one is waiting (the share is a ceiling, not a priority).

A message for a job of a tenant at its share is *parked*: sent again for ``PARKED_RETRY_S`` later, without a
look at the database, so the job keeps its message (none is dropped while its job may wait for it: nothing
depends on a sweeper), and parked again for as long as the tenant is full on the worker that takes it. A
sweeper's message for a job whose parked message this worker sent and is still due is dropped instead, so that
sweepers do not multiply a parked backlog's messages.

Counts are this process's (a ``threads`` pool: every slot is a thread of it); ``slots`` is set from the worker's
concurrency when it starts.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from celery.signals import worker_init

__all__ = ["PARKED_RETRY_S", "PRUNE_AT", "SHARES", "STALE_AFTER_S", "TenantShares"]

PARKED_RETRY_S = 1.0
"""How long a parked message waits before it asks for a slot again."""
STALE_AFTER_S = 5.0
"""How long past its time a parked message is still expected here (a busy worker runs it late); after that it
went to another worker, and a sweeper's message for its job is parked afresh (a second parked message is
harmless)."""
PRUNE_AT = 10_000
"""Parked entries kept before the stale ones are dropped."""


class TenantShares:
    """Which tenants this worker's slots are driving, and which jobs wait with a message parked here."""

    def __init__(self, share: float = 1.0, slots: int = 1, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = share
        self.slots = slots
        self._clock = clock
        self._lock = threading.Lock()
        self._driving: Counter[str] = Counter()
        self._parked: dict[tuple[str, str], float] = {}  # when each job's parked message is due

    @property
    def limit(self) -> int:
        """Slots one tenant may hold at once: its share of this worker's, rounded down, at least one."""
        return max(1, int(self.share * self.slots))

    def full(self) -> frozenset[str]:
        """The tenants holding their share of this worker's slots now."""
        with self._lock:
            return frozenset(tenant for tenant, held in self._driving.items() if held >= self.limit)

    def take(self, tenant_id: str) -> bool:
        """Hold a slot for one of ``tenant_id``'s jobs; False if the tenant holds its share already."""
        with self._lock:
            if self._driving[tenant_id] >= self.limit:
                return False
            self._driving[tenant_id] += 1
            return True

    def give_back(self, tenant_id: str) -> None:
        with self._lock:
            self._driving[tenant_id] -= 1
            if self._driving[tenant_id] <= 0:
                del self._driving[tenant_id]

    def parked_here(self, job: tuple[str, str]) -> bool:
        """Whether this worker parked a message for ``job`` (a tenant's id and the job's) that is still due."""
        with self._lock:
            due = self._parked.get(job)
        return due is not None and self._clock() < due + STALE_AFTER_S

    def park(self, job: tuple[str, str]) -> None:
        with self._lock:
            now = self._clock()
            if len(self._parked) >= PRUNE_AT:  # entries of messages that went to other workers stay otherwise
                self._parked = {key: due for key, due in self._parked.items() if now < due + STALE_AFTER_S}
            self._parked[job] = now + PARKED_RETRY_S

    def unpark(self, job: tuple[str, str]) -> None:
        with self._lock:
            self._parked.pop(job, None)


SHARES = TenantShares()
"""This worker process's (its ``share`` and ``slots`` are set when the worker starts)."""


@worker_init.connect
def _size(sender: Any = None, **_: Any) -> None:
    settings = getattr(sender.app.conf, "switchyard_settings", None) if sender is not None else None
    if settings is not None:
        SHARES.share = settings.tenant_worker_share
    if isinstance(getattr(sender, "concurrency", None), int):
        SHARES.slots = sender.concurrency
