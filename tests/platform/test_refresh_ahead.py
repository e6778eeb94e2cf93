"""RefreshAheadCache: a value the request path reads from the database, kept a few seconds, refreshed before it
expires, read once however many callers miss it together, never served past its lifetime."""

from __future__ import annotations

import asyncio

import pytest

from switchyard.platform.refresh_ahead import RefreshAheadCache


class Source:
    """The values a cache reads: each read takes a turn of the loop (or waits for `gate`), counted per key."""

    def __init__(self) -> None:
        self.value = 1
        self.reads: list[str] = []
        self.gate: asyncio.Event | None = None
        self.error: Exception | None = None

    async def read(self, key: str) -> int:
        self.reads.append(key)
        if self.gate is not None:
            await self.gate.wait()
        else:
            await asyncio.sleep(0)
        if self.error is not None:
            raise self.error
        return self.value


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_callers_that_miss_together_share_one_read() -> None:
    source = Source()
    cache = RefreshAheadCache(1.0, source.read)
    assert await asyncio.gather(*(cache.get("k") for _ in range(16))) == [1] * 16
    assert source.reads == ["k"]
    assert await cache.get("k") == 1  # fresh: no read
    assert source.reads == ["k"]


async def test_a_use_near_the_end_of_its_life_refreshes_in_the_background_and_is_never_served_past_it() -> None:
    source, clock = Source(), Clock()
    cache = RefreshAheadCache(1.0, source.read, clock=clock)
    assert await cache.get("k") == 1
    source.value = 2
    clock.now += 0.5  # half its life left: served as it is, nothing read
    assert await cache.get("k") == 1
    assert source.reads == ["k"]
    clock.now += 0.3  # the last quarter: served at once, and one read starts behind it
    assert await asyncio.gather(cache.get("k"), cache.get("k")) == [1, 1]
    await asyncio.sleep(0.01)
    assert source.reads == ["k", "k"]
    assert await cache.get("k") == 2  # the refreshed value, a whole lifetime from its read
    clock.now += 0.9
    assert await cache.get("k") == 2
    source.value = 3
    source.gate = asyncio.Event()
    clock.now += 0.2  # expired: the caller waits for a read rather than take the old value
    waiting = asyncio.ensure_future(cache.get("k"))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    source.gate.set()
    assert await waiting == 3


async def test_a_value_forgotten_during_its_read_is_not_stored() -> None:
    source = Source()
    source.gate = asyncio.Event()
    cache = RefreshAheadCache(1.0, source.read)
    first = asyncio.ensure_future(cache.get("k"))
    await asyncio.sleep(0.01)
    cache.forget("k")  # e.g. the key was revoked while it was being read
    source.gate.set()
    assert await first == 1  # that caller gets what its read found
    source.value = 2
    assert await cache.get("k") == 2  # but the cache kept nothing of it: read again
    assert source.reads == ["k", "k"]


async def test_a_failed_read_raises_to_its_callers_and_a_failed_refresh_keeps_the_entry_until_it_expires() -> None:
    source, clock = Source(), Clock()
    cache = RefreshAheadCache(1.0, source.read, clock=clock)
    source.error = RuntimeError("database away")
    with pytest.raises(RuntimeError, match="database away"):
        await asyncio.gather(cache.get("k"), cache.get("k"))
    assert source.reads == ["k"]
    source.error = None
    assert await cache.get("k") == 1
    source.error = RuntimeError("database away")
    clock.now += 0.9
    assert await cache.get("k") == 1  # refresh started, and failed, behind this use
    await asyncio.sleep(0.01)
    assert await cache.get("k") == 1  # still within its life
    clock.now += 0.2
    with pytest.raises(RuntimeError, match="database away"):
        await cache.get("k")


async def test_a_caller_that_goes_away_does_not_cancel_the_read_the_others_wait_for() -> None:
    source = Source()
    source.gate = asyncio.Event()
    cache = RefreshAheadCache(1.0, source.read)
    leaving, staying = asyncio.ensure_future(cache.get("k")), asyncio.ensure_future(cache.get("k"))
    await asyncio.sleep(0.01)
    leaving.cancel()
    source.gate.set()
    assert await staying == 1
    assert leaving.cancelled()
    assert source.reads == ["k"]


async def test_with_no_lifetime_nothing_is_kept_but_callers_together_still_share_a_read() -> None:
    source = Source()
    cache = RefreshAheadCache(0.0, source.read)
    assert await asyncio.gather(cache.get("k"), cache.get("k")) == [1, 1]
    assert await cache.get("k") == 1
    assert source.reads == ["k", "k"]


async def test_the_entries_are_bounded() -> None:
    source = Source()
    cache = RefreshAheadCache(60.0, source.read, max_entries=3)
    for key in "abcd":
        await cache.get(key)
    await cache.get("a")  # the table was full at "d" and started again, so "a" is read again
    assert source.reads == ["a", "b", "c", "d", "a"]


async def test_drain_waits_for_every_read_under_way_forgotten_or_left_by_its_caller() -> None:
    """A process closes its database after draining: a read still under way would hold a connection of it."""
    source, clock = Source(), Clock()
    cache = RefreshAheadCache(1.0, source.read, clock=clock)
    assert await cache.get("refreshed") == 1
    source.gate = asyncio.Event()
    clock.now += 0.8
    assert await cache.get("refreshed") == 1  # a read starts behind it
    left = asyncio.ensure_future(cache.get("left"))
    forgotten = asyncio.ensure_future(cache.get("forgotten"))
    await asyncio.sleep(0.01)
    left.cancel()  # its caller went away; the read goes on
    cache.forget("forgotten")
    draining = asyncio.ensure_future(cache.drain())
    await asyncio.sleep(0.01)
    assert sorted(source.reads) == ["forgotten", "left", "refreshed", "refreshed"]
    assert not draining.done()
    source.gate.set()
    await asyncio.wait_for(draining, 1)
    assert await forgotten == 1
    await cache.drain()  # nothing under way: returns at once
