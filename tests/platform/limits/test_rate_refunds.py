"""A rate's hit can be given back: the bucket is as if the hit never happened, never fuller than full."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchyard.platform.limits import MemoryRateLimiter, RateLimiter, RedisRateLimiter

RATE = 100  # per minute: one unit every 0.6 s, so the refill during a test is a unit at most


class FrozenClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def _refund_restores_the_bucket(limiter: RateLimiter, key: str) -> None:
    first = await limiter.hit(key, rate=RATE, period_s=60.0, cost=40)
    assert first.allowed
    await limiter.refund(key, rate=RATE, period_s=60.0, cost=40)
    whole = await limiter.hit(key, rate=RATE, period_s=60.0, cost=RATE)  # a full bucket's worth
    assert whole.allowed, "the refunded units were not given back"
    await limiter.refund(key, rate=RATE, period_s=60.0, cost=RATE)
    await limiter.refund(key, rate=RATE, period_s=60.0, cost=RATE)  # more than was spent: still only full
    assert (await limiter.hit(key, rate=RATE, period_s=60.0, cost=RATE)).allowed
    assert not (await limiter.hit(key, rate=RATE, period_s=60.0, cost=1)).allowed


async def test_memory_refund_gives_the_units_back_and_never_overfills() -> None:
    clock = FrozenClock()
    limiter = MemoryRateLimiter(clock)
    await _refund_restores_the_bucket(limiter, "tenant:t")
    before = await limiter.hit("key:k", rate=RATE, period_s=60.0, cost=30)
    await limiter.hit("key:k", rate=RATE, period_s=60.0, cost=20)
    await limiter.refund("key:k", rate=RATE, period_s=60.0, cost=20)
    again = await limiter.hit("key:k", rate=RATE, period_s=60.0, cost=0)  # looks without spending
    assert again.remaining == before.remaining  # exactly as after the first hit
    await limiter.refund("key:unknown", rate=RATE, period_s=60.0, cost=5)  # nothing to give back: a no-op
    assert (await limiter.hit("key:unknown", rate=RATE, period_s=60.0, cost=RATE)).allowed


@pytest.fixture
async def redis_limiter(redis_url: str) -> AsyncIterator[tuple[RedisRateLimiter, Any, str]]:
    import redis.asyncio as redis

    client = redis.Redis.from_url(redis_url)
    prefix = f"test:rl:{uuid.uuid4().hex}:"
    yield RedisRateLimiter(client, prefix=prefix), client, prefix
    await client.aclose()


@pytest.mark.redis
async def test_redis_refund_gives_the_units_back_and_never_overfills(
    redis_limiter: tuple[RedisRateLimiter, Any, str],
) -> None:
    limiter, client, prefix = redis_limiter
    await _refund_restores_the_bucket(limiter, "tenant:t")
    assert (await limiter.hit("key:k", rate=RATE, period_s=60.0, cost=5)).allowed
    await limiter.refund("key:k", rate=RATE, period_s=60.0, cost=5)
    assert await client.exists(prefix + "key:k") == 0  # full again: nothing left behind
    await limiter.refund("key:unknown", rate=RATE, period_s=60.0, cost=5)
    assert await client.exists(prefix + "key:unknown") == 0


@pytest.mark.parametrize("now", [1988.0003292451154, 1_000.0])
async def test_a_full_buckets_last_unit_is_never_refused_by_rounding(now: float) -> None:
    """``(now + 60) - 60`` is above ``now`` for some clock readings (the first here): a key's only request of the
    minute was refused 429 on such a reading."""
    clock = FrozenClock()
    clock.now = now
    limiter = MemoryRateLimiter(clock)
    assert (await limiter.hit("key:only", rate=1, period_s=60.0)).allowed
    assert not (await limiter.hit("key:only", rate=1, period_s=60.0)).allowed
    assert (await limiter.hit("tenant:whole", rate=7, period_s=60.0, cost=7)).allowed
