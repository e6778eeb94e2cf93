"""A `redis-server` of the test's own (tests stop it to play a Redis outage) and the app served over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.platform.limits.servers import RedisServer, ServedApp, serve_app


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def served_app(settings: Any) -> AsyncIterator[ServedApp]:
    async with serve_app(settings) as served:
        yield served
