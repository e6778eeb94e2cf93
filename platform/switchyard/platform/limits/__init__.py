"""Rate limits (GCRA) and concurrency caps, in-process or in Redis.

When the limiters' Redis is unreachable they raise :class:`LimitsUnavailable` rather than guess: the gateway
answers 503 with ``retry-after`` and agent runs wait. Their Redis client gives up quickly (short connect and
read timeouts, one immediate retry for a connection that went stale), so an outage never holds a request or a
shutdown for long.
"""

from __future__ import annotations

from typing import Any

from switchyard.platform.limits.concurrency import ConcurrencyLimiter, MemoryConcurrency, RedisConcurrency
from switchyard.platform.limits.errors import LimitsUnavailable
from switchyard.platform.limits.gcra import Decision, MemoryRateLimiter, RateLimiter, RedisRateLimiter

__all__ = [
    "SLOT_TTL_S",
    "ConcurrencyLimiter",
    "Decision",
    "LimitsUnavailable",
    "MemoryConcurrency",
    "MemoryRateLimiter",
    "RateLimiter",
    "RedisConcurrency",
    "RedisRateLimiter",
    "api_key_limit_key",
    "limiters_for",
    "tenant_limit_key",
]

REDIS_CONNECT_TIMEOUT_S = 1.0
REDIS_READ_TIMEOUT_S = 2.0  # the limiters' commands are single short scripts
SLOT_TTL_S = 300.0  # a crashed process's request slots come back within this time


def tenant_limit_key(tenant_id: str) -> str:
    """Key of a tenant's token rate and requests in flight (gateway requests and agent runs alike)."""
    return f"tenant:{tenant_id}"


def api_key_limit_key(key_id: str) -> str:
    """Key of an API key's request rate."""
    return f"key:{key_id}"


def limiters_for(redis_url: str | None) -> tuple[RateLimiter, ConcurrencyLimiter, Any]:
    """The limiters of one process: shared through Redis when a URL is given, else in-process.

    Returns ``(rate limiter, concurrency limiter, redis client or None)``; the caller closes the client.
    """
    if not redis_url:
        return MemoryRateLimiter(), MemoryConcurrency(), None
    import redis.asyncio as redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    client = redis.Redis.from_url(
        redis_url,
        socket_connect_timeout=REDIS_CONNECT_TIMEOUT_S,
        socket_timeout=REDIS_READ_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),
    )
    return RedisRateLimiter(client), RedisConcurrency(client, ttl_s=SLOT_TTL_S), client
