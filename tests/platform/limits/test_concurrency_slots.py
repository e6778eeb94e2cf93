"""Request slots are held per request with their own expiry: a crashed holder's slot comes back by itself, a
live holder's slot is renewed for as long as its request runs, and an unreachable Redis is said, not guessed."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchyard.platform.limits import LimitsUnavailable, MemoryConcurrency, RedisConcurrency, limiters_for
from tests.platform.limits.servers import RedisServer

TTL_S = 0.5

# A process that takes the tenant's only slot and keeps it (renewing) until it is killed.
HOLDER = """
import asyncio, sys
import redis.asyncio as redis
from switchyard.platform.limits import RedisConcurrency

async def main() -> None:
    slots = RedisConcurrency(redis.Redis.from_url(sys.argv[1]), prefix=sys.argv[2], ttl_s=float(sys.argv[3]))
    assert await slots.acquire("tenant:t", 1, "crashed-request")
    print("held", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_memory_slots_are_held_per_holder() -> None:
    slots = MemoryConcurrency()
    assert await slots.acquire("tenant:t", 2, "a")
    assert await slots.acquire("tenant:t", 2, "a")  # taking it again is a no-op
    assert await slots.acquire("tenant:t", 2, "b")
    assert not await slots.acquire("tenant:t", 2, "c")
    await slots.release("tenant:t", "a")
    await slots.release("tenant:t", "a")  # releasing twice frees nothing more
    assert slots.in_flight("tenant:t") == 1
    assert await slots.acquire("tenant:t", 2, "c")
    assert not await slots.acquire("tenant:t", 2, "d")


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    import redis.asyncio as redis

    client = redis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"test:cc:{uuid.uuid4().hex}:"


@pytest.mark.redis
async def test_a_crashed_holders_slot_frees_itself_while_the_tenant_keeps_retrying(
    redis_url: str, redis_client: Any, prefix: str
) -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, redis_url, prefix, str(TTL_S), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert (await holder.stdout.readline()).strip() == b"held"
        slots = RedisConcurrency(redis_client, prefix=prefix, ttl_s=TTL_S)
        # While the holder lives it renews its slot: three TTLs of retries are all refused.
        for _ in range(3 * int(TTL_S / 0.05)):
            assert not await slots.acquire("tenant:t", 1, "retrying-request")
            await asyncio.sleep(0.05)
        holder.kill()
        await holder.wait()
        # Crashed: the slot comes back within its TTL even though this client keeps asking (and is refused).
        refused = 0
        for _ in range(20 * int(TTL_S / 0.02)):
            if await slots.acquire("tenant:t", 1, "retrying-request"):
                break
            refused += 1
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the crashed holder's slot never came back")
        assert refused > 0  # the retries really ran into the dead holder's slot
        await slots.release("tenant:t", "retrying-request")
        assert await redis_client.exists(prefix + "tenant:t") == 0
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()


@pytest.mark.redis
async def test_a_long_running_holder_keeps_its_slot(redis_client: Any, prefix: str) -> None:
    running = RedisConcurrency(redis_client, prefix=prefix, ttl_s=TTL_S)
    other = RedisConcurrency(redis_client, prefix=prefix, ttl_s=TTL_S)
    assert await running.acquire("tenant:t", 1, "long-request")
    await asyncio.sleep(4 * TTL_S)  # nobody else touches the key meanwhile
    assert not await other.acquire("tenant:t", 1, "next-request")
    await running.release("tenant:t", "long-request")
    assert await other.acquire("tenant:t", 1, "next-request")
    await other.release("tenant:t", "next-request")


@pytest.mark.redis
async def test_a_holder_paused_past_its_ttl_does_not_take_its_slot_back(redis_client: Any, prefix: str) -> None:
    paused = RedisConcurrency(redis_client, prefix=prefix, ttl_s=TTL_S)
    other = RedisConcurrency(redis_client, prefix=prefix, ttl_s=TTL_S)
    assert await paused.acquire("tenant:t", 1, "paused-request")
    time.sleep(2 * TTL_S)  # noqa: ASYNC251 (blocks the event loop, as SIGSTOP would: no renewal runs)
    assert await other.acquire("tenant:t", 1, "next-request")  # the paused holder's slot had expired
    await asyncio.sleep(2 * TTL_S)  # the paused holder's renewals now run and find its slot gone
    members = [m.decode() for m in await redis_client.zrange(prefix + "tenant:t", 0, -1)]
    assert members == ["next-request"]
    await paused.release("tenant:t", "paused-request")  # gives back nothing that is not its own
    assert not await paused.acquire("tenant:t", 1, "third-request")
    await other.release("tenant:t", "next-request")


@pytest.mark.redis
async def test_redis_slots_are_held_per_holder(redis_client: Any, prefix: str) -> None:
    slots = RedisConcurrency(redis_client, prefix=prefix)
    assert await slots.acquire("tenant:t", 2, "a")
    assert await slots.acquire("tenant:t", 2, "a")
    assert await slots.acquire("tenant:t", 2, "b")
    assert not await slots.acquire("tenant:t", 2, "c")
    await slots.release("tenant:t", "a")
    await slots.release("tenant:t", "a")
    assert await redis_client.zcard(prefix + "tenant:t") == 1
    assert await slots.acquire("tenant:t", 2, "c")
    assert not await slots.acquire("tenant:t", 2, "d")
    await slots.release("tenant:t", "b")
    await slots.release("tenant:t", "c")
    await slots.aclose()


async def test_an_unreachable_redis_refuses_to_decide_and_releases_quietly(redis_server: RedisServer) -> None:
    rate_limiter, slots, client = limiters_for(redis_server.url)
    try:
        assert await slots.acquire("tenant:t", 1, "before")
        redis_server.stop()
        with pytest.raises(LimitsUnavailable):
            await slots.acquire("tenant:t", 1, "during")
        with pytest.raises(LimitsUnavailable):
            await rate_limiter.hit("tenant:t", rate=10, period_s=60.0)
        await slots.release("tenant:t", "before")  # logged; the slot would expire by itself
        redis_server.start()  # empty, as Redis without persistence restarts
        assert await slots.acquire("tenant:t", 1, "after")
        assert (await rate_limiter.hit("tenant:t", rate=10, period_s=60.0)).allowed
        await slots.release("tenant:t", "after")
    finally:
        await client.aclose()
