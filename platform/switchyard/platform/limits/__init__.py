"""Rate limits (GCRA) and concurrency caps, in-process or in Redis."""

from __future__ import annotations

from typing import Any

from switchyard.platform.limits.concurrency import ConcurrencyLimiter, MemoryConcurrency, RedisConcurrency
from switchyard.platform.limits.gcra import Decision, MemoryRateLimiter, RateLimiter, RedisRateLimiter

__all__ = [
    "ConcurrencyLimiter",
    "Decision",
    "MemoryConcurrency",
    "MemoryRateLimiter",
    "RateLimiter",
    "RedisConcurrency",
    "RedisRateLimiter",
    "api_key_limit_key",
    "limiters_for",
    "tenant_limit_key",
]


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

    client = redis.Redis.from_url(redis_url)
    return RedisRateLimiter(client), RedisConcurrency(client), client
