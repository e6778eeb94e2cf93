"""Servers of a test's own: a `redis-server` on a free port (so the test may stop it and start it again), and
the app served over real HTTP by uvicorn on a thread of its own, so that several requests are in flight at once
(the in-process test client runs one request at a time)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import redis

from tests.support.ports import free_port

__all__ = ["RedisServer", "ServedApp", "make_tenant_over_http", "serve_app"]


class RedisServer:
    """One `redis-server` process without persistence (a restart comes back empty, as after a crash)."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.process is None, "already running"
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            for _ in range(200):
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    assert self.process.poll() is None, "redis-server exited"
                    time.sleep(0.02)
            raise AssertionError("redis-server did not answer")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@dataclass
class ServedApp:
    """The app on ``url``, and a tenant made through its API (``headers`` carry its developer key)."""

    url: str
    app: Any
    tenant_id: str
    headers: dict[str, str]


@asynccontextmanager
async def serve_app(settings: Any) -> AsyncIterator[ServedApp]:
    """Serve ``create_app(settings)`` on a free port until the block ends, then shut it down (or fail)."""
    import uvicorn

    from switchyard.platform.app import create_app

    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            assert thread.is_alive(), "the app did not start"
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        tenant_id, headers = await make_tenant_over_http(url, settings.database_url)
        yield ServedApp(url=url, app=app, tenant_id=tenant_id, headers=headers)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the app did not shut down"


async def make_tenant_over_http(url: str, database_url: str) -> tuple[str, dict[str, str]]:
    """A tenant made through the API with an operator key made in the database, and its developer key."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED, Database
    from switchyard.platform.tenants.service import create_operator_key

    database = Database(database_url)
    try:
        async with database.unit_of_work(UNSCOPED) as session:
            operator_key = await create_operator_key(session, actor=CLI_ACTOR, name="tests")
    finally:
        await database.dispose()
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        made = await http.post(
            "/v1/admin/tenants", json={"name": "outage"}, headers={"Authorization": f"Bearer {operator_key}"}
        )
        assert made.status_code == 201, made.text
        owner = {"Authorization": f"Bearer {made.json()['owner_key']['value']}"}
        key = await http.post("/v1/api-keys", json={"role": "developer"}, headers=owner)
        assert key.status_code == 201, key.text
    return made.json()["id"], {"Authorization": f"Bearer {key.json()['value']}"}
