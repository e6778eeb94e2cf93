"""Values the request path reads from the database, kept a few seconds: refreshed ahead of expiry, read once per miss.

An entry lives ``ttl_s`` seconds and is never used past that. A caller that finds it in the last quarter of its life
(``REFRESH_AHEAD``) gets it at once and starts one read in the background that replaces it, so under steady traffic
a hot entry never expires. A caller that finds no entry, or an expired one, waits for a read, and every caller of
the same key meanwhile waits for that same read (single flight). Without both, every request in flight when a hot
entry expired read the database at once, each read waiting its turns of a busy event loop, and they all stalled
together: on one API process at 16 connections, once a second, for 60-180 ms.

``forget`` drops an entry and any read under way for it (a revoked key must not come back from a read that started
before the revocation). ``drain`` waits for every read under way, forgotten ones included: a process that shuts down
awaits it before it closes the database, whose connection a read would otherwise still hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from functools import partial
from typing import Any, Generic, TypeVar

__all__ = ["REFRESH_AHEAD", "RefreshAheadCache"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

REFRESH_AHEAD = 0.25  # the share of an entry's life, at its end, in which a use refreshes it in the background


class RefreshAheadCache(Generic[K, V]):
    """Up to ``max_entries`` values of ``load(key)``, each kept ``ttl_s`` seconds (0: none kept, concurrent callers
    still share one read)."""

    def __init__(
        self,
        ttl_s: float,
        load: Callable[[K], Coroutine[Any, Any, V]],
        *,
        max_entries: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self._load = load
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[K, tuple[V, float]] = {}  # key -> (value, monotonic time it expires)
        self._reading: dict[K, asyncio.Task[V]] = {}
        self._running: set[asyncio.Task[V]] = set()  # every read not finished, forgotten ones too

    async def get(self, key: K) -> V:
        """``key``'s value: the cached one while fresh, else the one a read returns (raising what the read raised)."""
        entry = self._entries.get(key)
        if entry is not None:
            value, until = entry
            left = until - self._clock()
            if left > 0:
                if left < self.ttl_s * REFRESH_AHEAD:
                    self._read(key)
                return value
        # shielded: a caller that goes away (a client that disconnects) does not cancel the others' read
        return await asyncio.shield(self._read(key))

    def forget(self, key: K) -> None:
        """Drop ``key``'s entry, and what a read under way would bring back."""
        self._entries.pop(key, None)
        self._reading.pop(key, None)

    def _read(self, key: K) -> asyncio.Task[V]:
        task = self._reading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(key))
            self._reading[key] = task
            self._running.add(task)
            task.add_done_callback(partial(self._done, key))
        return task

    async def drain(self) -> None:
        """Wait until no read is under way (their results and errors are the callers' or dropped, as ever)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    def _done(self, key: K, task: asyncio.Task[V]) -> None:
        self._running.discard(task)
        if self._reading.get(key) is not task:
            return  # forgotten meanwhile
        del self._reading[key]
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so a failed background refresh is not reported as unhandled
        if error is not None:
            log.debug("reading %r for the cache failed: %r", key, error)
            return
        if self.ttl_s <= 0:
            return
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = (task.result(), self._clock() + self.ttl_s)
