"""A real Switchyard API server on 127.0.0.1 (uvicorn in a thread) for clients that no one here wrote."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from switchyard.platform.app import create_app
from switchyard.platform.background.inline import InlineDispatcher
from switchyard.platform.bootstrap import bootstrap
from switchyard.platform.db import Database
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.settings import Settings
from tests.support.ports import free_port


@dataclass(frozen=True)
class LiveServer:
    base_url: str  # .../v1
    operator_key: str
    tenant_key: str

    def new_tenant_key(self) -> str:
        response = httpx.post(
            f"{self.base_url}/admin/tenants",
            json={"name": "compat"},
            headers={"Authorization": f"Bearer {self.operator_key}"},
        )
        response.raise_for_status()
        return str(response.json()["owner_key"]["value"])


@pytest.fixture(scope="session")
def live_server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("live")
    shutil.copyfile(sqlite_template, data / "switchyard.db")
    settings = Settings(
        data_dir=data,
        database_url=f"sqlite+aiosqlite:///{data / 'switchyard.db'}",
        time_scale=0,
        port=free_port(),
        tenant_tokens_per_minute=200_000,
    )

    async def first_start() -> Any:
        database = Database(settings.database_url)
        try:
            return await bootstrap(database)
        finally:
            await database.dispose()

    keys = asyncio.run(first_start())
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.02)
    assert server.started, "the API server did not start"
    # Agent runs and background responses execute in the server's own event loop (the inline dispatcher), not on a
    # Celery worker as under `switchyard up`: without it they would wait in the broker for a worker these tests do
    # not start. What clients see of them is the same; the worker's own behaviour is tests/integration's.
    gateway = app.state.gateway
    environment = RunEnvironment(database=app.state.database, pool=gateway.pool, admission=gateway.admission)
    app.state.jobs = InlineDispatcher(environment)
    yield LiveServer(f"http://127.0.0.1:{settings.port}/v1", keys.operator_key, keys.tenant_key)
    server.should_exit = True
    thread.join(timeout=20)


@pytest.fixture
def api_key(live_server: LiveServer) -> str:
    """The owner key of a tenant of the test's own: a request without ``max_tokens`` is admitted for up to 16,000
    output tokens, so tests sharing one tenant would spend its per-minute token allowance between them."""
    return live_server.new_tenant_key()
