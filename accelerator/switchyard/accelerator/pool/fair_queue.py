"""Admission order when the fleet is saturated: strict priority tiers, weighted fair queuing across tenants.

Within a tier each tenant's requests get virtual finish tags ``max(V, tenant's last tag) + cost / weight``
(cost = prompt + expected output tokens) and the smallest tag goes first, so a tenant that floods the queue
only delays itself: another tenant's next request is tagged from the current virtual time, not behind the
flood. Each tenant's tags only grow, so one FIFO per (tier, tenant) holds them and choosing the next request
looks at one head per tenant. Pure and synchronous.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._queues: dict[tuple[int, str], deque[tuple[float, float, T]]] = {}
        self._last_tag: dict[str, float] = {}
        self._virtual_time = 0.0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, item: T, *, tenant: str, cost: float, weight: float = 1.0, priority: int = 1) -> None:
        if cost < 0 or weight <= 0:
            raise ValueError("cost must be >= 0 and weight > 0")
        start = max(self._virtual_time, self._last_tag.get(tenant, 0.0))
        finish = start + cost / weight
        self._last_tag[tenant] = finish
        self._queues.setdefault((priority, tenant), deque()).append((finish, start, item))
        self._size += 1

    def pop(self, eligible: Callable[[str], bool] | None = None) -> T | None:
        """The next item in order whose tenant is ``eligible`` (all are by default); ``None`` if there is none."""
        best: tuple[int, float] | None = None
        best_key: tuple[int, str] | None = None
        for (priority, tenant), queue in self._queues.items():
            if eligible is not None and not eligible(tenant):
                continue
            rank = (-priority, queue[0][0])
            if best is None or rank < best:
                best, best_key = rank, (priority, tenant)
        if best_key is None:
            return None
        queue = self._queues[best_key]
        _finish, start, item = queue.popleft()
        if not queue:
            del self._queues[best_key]
        self._size -= 1
        self._virtual_time = max(self._virtual_time, start)
        return item

    def remove(self, match: Callable[[T], bool]) -> T | None:
        """Take out the first queued item that ``match``es (a request given up on); ``None`` if none does."""
        for key, queue in self._queues.items():
            for entry in queue:
                if match(entry[2]):
                    queue.remove(entry)
                    if not queue:
                        del self._queues[key]
                    self._size -= 1
                    return entry[2]
        return None

    def queued_by_tenant(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (_priority, tenant), queue in self._queues.items():
            counts[tenant] = counts.get(tenant, 0) + len(queue)
        return counts
