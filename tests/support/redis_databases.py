"""A Redis database (1-14) that no other test holds, on this run or on any other run against the same Redis.

A Celery worker takes every job on its broker's queues: two tests whose workers shared a Redis database would take
each other's jobs. Tests run side by side (``pytest -n``, or two runs on one machine), so each database is leased:
``SET NX`` of a key in database 0 that expires if its holder dies, and the database is emptied when taken.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    import redis

DATABASES = range(1, 15)
"""Database 0 keeps the leases; 15 is the test Redis's own (``SWITCHYARD_TEST_REDIS_URL``, limiters' keys)."""
LEASE_S = 900
"""Longer than any test; a crashed run's leases expire after it."""


@contextmanager
def redis_database_of_its_own(redis_url: str, *, wait_s: float = 120.0) -> Iterator[str]:
    """``redis_url`` on a database this block holds alone, emptied when taken and when given back."""
    import redis

    url = make_url(redis_url)
    leases = redis.Redis.from_url(url.set(database="0").render_as_string(hide_password=False))
    holder = uuid.uuid4().hex
    deadline = time.monotonic() + wait_s
    try:
        while (number := _take(leases, holder)) is None:
            assert time.monotonic() < deadline, f"no free Redis database 1-14 on {url.host}:{url.port} in {wait_s} s"
            time.sleep(0.2)
        taken = url.set(database=str(number)).render_as_string(hide_password=False)
        redis.Redis.from_url(taken).flushdb()
        try:
            yield taken
        finally:
            redis.Redis.from_url(taken).flushdb()
            if leases.get(_key(number)) == holder.encode():
                leases.delete(_key(number))
    finally:
        leases.close()


def _take(leases: redis.Redis, holder: str) -> int | None:
    for number in DATABASES:
        if leases.set(_key(number), holder, nx=True, ex=LEASE_S):
            return number
    return None


def _key(number: int) -> str:
    return f"switchyard-test:redis-database:{number}"
