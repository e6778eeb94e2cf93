"""Per-tenant caps on requests in flight: in-process by default, in Redis when configured.

A slot is held by one request (its *holder*, an id unique to the request) until the request releases it. In
Redis each slot also has its own expiry: the process holding it renews it while the request runs, so the slots
of a process that crashed free themselves one TTL after its last renewal, whatever other requests do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from switchyard.platform.limits.errors import REDIS_UNREACHABLE, LimitsUnavailable

__all__ = ["ConcurrencyLimiter", "MemoryConcurrency", "RedisConcurrency"]

log = logging.getLogger(__name__)


class ConcurrencyLimiter(Protocol):
    async def acquire(self, key: str, limit: int, holder: str) -> bool:
        """Take one of ``key``'s ``limit`` slots for ``holder`` (taking it again is a no-op); False if all are
        taken. Raises :class:`LimitsUnavailable` when the limiter cannot decide."""
        ...

    async def release(self, key: str, holder: str) -> None:
        """Give ``holder``'s slot back. Never raises: a slot that cannot be given back expires by itself."""
        ...


class MemoryConcurrency:
    """One process's slots (the embedded default); they die with the process."""

    def __init__(self) -> None:
        self._holders: dict[str, set[str]] = {}

    async def acquire(self, key: str, limit: int, holder: str) -> bool:
        holders = self._holders.setdefault(key, set())
        if holder in holders:
            return True
        if len(holders) >= limit:
            if not holders:
                del self._holders[key]
            return False
        holders.add(holder)
        return True

    async def release(self, key: str, holder: str) -> None:
        holders = self._holders.get(key)
        if holders is None:
            return
        holders.discard(holder)
        if not holders:
            del self._holders[key]

    def in_flight(self, key: str) -> int:
        return len(self._holders.get(key, ()))


# One sorted set per key: member = holder, score = the slot's expiry (ms, Redis's clock). The key itself
# expires with its last slot, so an idle tenant leaves nothing behind.
_ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], expires, ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1000)
return 1
"""

# Renews the slots of the given holders that are still live (a slot that already expired is not brought back:
# it may have been given to another request); returns the holders whose slots were gone.
_RENEW_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + tonumber(ARGV[1])
local lost = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) > now then
    redis.call('ZADD', KEYS[1], 'XX', expires, ARGV[i])
  else
    table.insert(lost, ARGV[i])
  end
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1000)
end
return lost
"""


class RedisConcurrency:
    """Slots shared by every API and worker process, each with its own expiry (``ttl_s``).

    While this process holds slots, a task on its event loop renews them every ``ttl_s / 3``; it stops when the
    process holds none. A process that dies stops renewing, so its slots expire within ``ttl_s``. When Redis is
    unreachable :meth:`acquire` raises :class:`LimitsUnavailable`; :meth:`release` and the renewals log and
    move on (the slot then expires by itself).
    """

    def __init__(self, client: Any, prefix: str = "sy:cc:", ttl_s: float = 300.0) -> None:
        self._client = client
        self._prefix = prefix
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._renew_every_s = ttl_s / 3
        self._acquire = client.register_script(_ACQUIRE_LUA)
        self._renew = client.register_script(_RENEW_LUA)
        self._held: dict[str, set[str]] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._releasing: set[asyncio.Task[None]] = set()

    async def acquire(self, key: str, limit: int, holder: str) -> bool:
        try:
            taken = int(await self._acquire(keys=[self._prefix + key], args=[limit, holder, self._ttl_ms]))
        except REDIS_UNREACHABLE as exc:
            raise LimitsUnavailable(f"the concurrency limiter's Redis is unreachable: {exc}") from exc
        if taken:
            self._held.setdefault(key, set()).add(holder)
            loop = asyncio.get_running_loop()
            if self._renewer is None or self._renewer.done() or self._renewer.get_loop() is not loop:
                self._renewer = loop.create_task(self._renew_while_held())
        return bool(taken)

    async def release(self, key: str, holder: str) -> None:
        holders = self._held.get(key)
        if holders is not None:
            holders.discard(holder)
            if not holders:
                del self._held[key]
        if not self._held and self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        # In a task of its own: a caller cancelled meanwhile (a run's time limit) still gives the slot back.
        task = asyncio.get_running_loop().create_task(self._remove(key, holder))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
        await asyncio.shield(task)

    async def _remove(self, key: str, holder: str) -> None:
        try:
            await self._client.zrem(self._prefix + key, holder)
        except Exception as exc:  # an outage is expected here, a traceback per request is not useful
            log.warning("could not release the slot of %s on %s (%s); it expires by itself", holder, key, exc)

    async def _renew_while_held(self) -> None:
        while self._held:
            await asyncio.sleep(self._renew_every_s)
            for key, holders in list(self._held.items()):
                try:
                    lost = await self._renew(keys=[self._prefix + key], args=[self._ttl_ms, *holders])
                except Exception as exc:
                    log.warning("could not renew the slots held on %s (%s); will retry", key, exc)
                    continue
                for raw in lost:  # this process was too slow to renew them (paused, or Redis was away)
                    holder = raw.decode() if isinstance(raw, bytes) else str(raw)
                    log.warning("the slot of %s on %s had expired before its renewal; its request goes on", holder, key)
                    holders.discard(holder)
                if not holders and self._held.get(key) is holders:
                    del self._held[key]

    async def aclose(self) -> None:
        """Stop renewing (slots still held expire by themselves) and wait for releases under way."""
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
