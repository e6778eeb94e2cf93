"""Per-tenant caps on requests in flight: in-process by default, in Redis when configured."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ConcurrencyLimiter", "MemoryConcurrency", "RedisConcurrency"]


class ConcurrencyLimiter(Protocol):
    async def acquire(self, key: str, limit: int) -> bool: ...

    async def release(self, key: str) -> None: ...


class MemoryConcurrency:
    def __init__(self) -> None:
        self._in_flight: dict[str, int] = {}

    async def acquire(self, key: str, limit: int) -> bool:
        current = self._in_flight.get(key, 0)
        if current >= limit:
            return False
        self._in_flight[key] = current + 1
        return True

    async def release(self, key: str) -> None:
        current = self._in_flight.get(key, 0) - 1
        if current > 0:
            self._in_flight[key] = current
        else:
            self._in_flight.pop(key, None)

    def in_flight(self, key: str) -> int:
        return self._in_flight.get(key, 0)


_ACQUIRE_LUA = """
local n = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
"""


class RedisConcurrency:
    """Counters shared by every API process; a crashed process's slots come back when the key expires."""

    def __init__(self, client: Any, prefix: str = "sy:cc:", ttl_s: int = 600) -> None:
        self._client = client
        self._prefix = prefix
        self._ttl_s = ttl_s
        self._acquire = client.register_script(_ACQUIRE_LUA)

    async def acquire(self, key: str, limit: int) -> bool:
        return bool(int(await self._acquire(keys=[self._prefix + key], args=[limit, self._ttl_s])))

    async def release(self, key: str) -> None:
        await self._client.decr(self._prefix + key)
