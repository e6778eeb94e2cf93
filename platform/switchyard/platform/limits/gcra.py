"""Rate limits by GCRA (generic cell rate algorithm): in-process by default, in Redis when configured.

A limit is ``rate`` units per ``period_s`` with a burst of ``rate`` units. Keys are tenant or API-key ids,
never anything the client can choose (such as forwarding headers). A hit can be refunded: admission spends
a request's allowances one after the other and gives back what it spent when a later check refuses, so a
refusal changes nothing.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from switchyard.platform.limits.errors import REDIS_UNREACHABLE, LimitsUnavailable

__all__ = ["Decision", "MemoryRateLimiter", "RateLimiter", "RedisRateLimiter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_s: float  # until the bucket is full again
    retry_after_s: float  # until this request would be allowed (0 when allowed)


class RateLimiter(Protocol):
    async def hit(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> Decision:
        """Spend ``cost`` units of ``key``'s allowance, or say when they would be allowed. Raises
        :class:`LimitsUnavailable` when the limiter cannot decide."""
        ...

    async def refund(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> None:
        """Give back ``cost`` units of an allowed hit: the theoretical arrival time moves back by ``cost``
        intervals, never below now (a bucket that has refilled meanwhile stays full). Never raises: a refund
        that cannot be made is logged, and the units come back with time."""
        ...


ROUNDING_S = 1e-6
"""How late a call may be allowed by the arithmetic: ``tat + cost x interval - period`` is rounded, and a call that
takes a full bucket's last unit (a key's only request a minute, a tenant's whole token rate) must not be refused by
a rounding error (``(1988.0003292451154 + 60) - 60`` is above 1988.0003292451154)."""


def _decide(tat: float, now: float, *, rate: int, period_s: float, cost: int) -> tuple[Decision, float]:
    """Pure GCRA step: the decision and the new theoretical arrival time (``tat``)."""
    interval = period_s / rate
    burst = period_s  # a full bucket holds `rate` units
    tat = max(tat, now)
    new_tat = tat + cost * interval
    allow_at = new_tat - burst
    if cost > rate or allow_at > now + ROUNDING_S:
        retry = math.inf if cost > rate else allow_at - now
        remaining = max(0, int((burst - (tat - now)) / interval))
        return Decision(False, rate, remaining, tat - now, retry), tat
    remaining = max(0, int((burst - (new_tat - now)) / interval))
    return Decision(True, rate, remaining, new_tat - now, 0.0), new_tat


class MemoryRateLimiter:
    """One process's limits (the embedded default); several API processes each enforce their own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._tat: dict[str, float] = {}
        self._clock = clock

    async def hit(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> Decision:
        now = self._clock()
        decision, tat = _decide(self._tat.get(key, now), now, rate=rate, period_s=period_s, cost=cost)
        self._tat[key] = tat
        if len(self._tat) > 100_000:  # forget keys whose buckets are full again
            self._tat = {k: v for k, v in self._tat.items() if v > now}
        return decision

    async def refund(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> None:
        tat = self._tat.get(key)
        if tat is not None:
            self._tat[key] = max(self._clock(), tat - cost * period_s / rate)


_GCRA_LUA = """
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + cost * interval
if new_tat - burst > now + tonumber(ARGV[5]) then
  return {0, tostring(tat)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1000)
return {1, tostring(new_tat)}
"""

# A refund on Redis's own clock: the key disappears when its bucket is full again, as after a hit that expired.
_REFUND_LUA = """
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local new_tat = tat - tonumber(ARGV[1]) * tonumber(ARGV[2])
if new_tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil((new_tat - now) * 1000) + 1000)
end
return 1
"""


class RedisRateLimiter:
    """Limits shared by every API process, atomically in Redis (one Lua script per hit, Redis's clock).

    Raises :class:`LimitsUnavailable` when Redis is unreachable.
    """

    def __init__(self, client: Any, prefix: str = "sy:rl:") -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_GCRA_LUA)
        self._refund = client.register_script(_REFUND_LUA)

    async def hit(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> Decision:
        interval = period_s / rate
        if cost > rate:
            return Decision(False, rate, 0, 0.0, math.inf)
        try:
            seconds, micros = await self._client.time()
            now = seconds + micros / 1e6
            allowed, tat_text = await self._script(
                keys=[self._prefix + key], args=[now, interval, period_s, cost, ROUNDING_S]
            )
        except REDIS_UNREACHABLE as exc:
            raise LimitsUnavailable(f"the rate limiter's Redis is unreachable: {exc}") from exc
        tat = float(tat_text)
        remaining = max(0, int((period_s - (tat - now)) / interval))
        if int(allowed):
            return Decision(True, rate, remaining, tat - now, 0.0)
        return Decision(False, rate, remaining, tat - now, tat + cost * interval - period_s - now)

    async def refund(self, key: str, *, rate: int, period_s: float, cost: int = 1) -> None:
        try:
            await self._refund(keys=[self._prefix + key], args=[cost, period_s / rate])
        except Exception as exc:  # an outage is expected here, a traceback per request is not useful
            log.warning("could not refund %s units of %s (%s); they come back with time", cost, key, exc)
