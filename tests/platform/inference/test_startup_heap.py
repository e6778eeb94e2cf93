"""An API process and the fleet process set their startup heap aside from the collector's full passes (issue 22).

Measured before: a 107 KB ``allOf`` schema bomb in a Responses ``text.format`` cost the API loop ~150 ms of CPU a
request, ~105 ms of it full garbage collections walking the ~300,000 objects every process holds once started.
What is checked is that starting the process freezes its heap (no timing)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from switchyard.accelerator.pool import AcceleratorPool, DeploymentSpec, FleetServer
from switchyard.platform.app import create_app
from switchyard.platform.settings import Settings

SMALL = DeploymentSpec(name="small", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4)


async def test_an_api_process_freezes_its_startup_heap(database_url: str, tmp_path: Path) -> None:
    gc.unfreeze()
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, time_scale=0)
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        assert (await client.get("/healthz")).status_code == 200
        assert gc.get_freeze_count() > 10_000  # the app's modules, schemas and pool, at least
    assert gc.get_freeze_count() == 0  # thawed at shutdown: a stopped app's cycles are collectable again


async def test_the_fleet_process_freezes_its_startup_heap() -> None:
    gc.unfreeze()
    server = FleetServer(AcceleratorPool.from_specs([SMALL], time_scale=0))
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    frozen: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        frozen.append(gc.get_freeze_count())

    await server({"type": "lifespan"}, receive, send)  # type: ignore[arg-type]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert frozen[0] > 10_000
    assert frozen[1] == 0
