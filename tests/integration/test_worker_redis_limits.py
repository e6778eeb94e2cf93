"""A real worker started with ``SWITCHYARD_REDIS_URL`` (as ``compose.yaml`` starts it) executes agent runs: its
run limits share the API processes' Redis."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.redis]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def owner_headers(client: Any, name: str) -> dict[str, str]:
    """A new tenant's owner key (made through the API with an operator key), as request headers."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tenants.service import create_operator_key

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        operator = await create_operator_key(session, actor=CLI_ACTOR, name=name)
    created = await client.post(
        "/v1/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {operator}"}
    )
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['owner_key']['value']}"}


async def test_a_worker_with_redis_limits_executes_a_run(
    redis_url: str, sqlite_template: Path, tmp_path: Path, start_process: Any
) -> None:
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.settings import Settings

    database = tmp_path / "switchyard.db"
    shutil.copyfile(sqlite_template, database)
    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
        "SWITCHYARD_REDIS_URL": redis_url,
        "SWITCHYARD_TIME_SCALE": "0",
    }
    start_process("worker", "--pool", "threads", "--concurrency", "1", env=env)
    settings = Settings(
        data_dir=tmp_path / "data", database_url=env["SWITCHYARD_DATABASE_URL"], redis_url=redis_url, time_scale=0
    )
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        headers = await owner_headers(client, "redis-limits")
        agent = await client.post(
            "/v1/agents", json={"name": "maths", "model": MODEL, "tools": [{"type": "calculator"}]}, headers=headers
        )
        assert agent.status_code == 201, agent.text
        body = {
            "agent_id": agent.json()["id"],
            "thread": {"messages": [{"content": "please use calculator expression=6*7"}]},
        }
        run = (await client.post("/v1/runs", json=body, headers=headers)).json()
        path = f"/v1/threads/{run['thread_id']}/runs/{run['id']}"
        for _ in range(300):  # the worker starts, then executes the run (each model call admitted through Redis)
            current = (await client.get(path, headers=headers)).json()
            if current["status"] not in ("queued", "in_progress"):
                break
            await asyncio.sleep(0.1)
        assert current["status"] == "completed", current
        assert current["chip_us"] > 0
        # with no fleet process configured the worker simulated the model itself, and recorded its busy time
        for _ in range(100):  # once the run has ended
            if await _fleet_busy_chip_us(client) == current["chip_us"]:
                break
            await asyncio.sleep(0.1)
        assert await _fleet_busy_chip_us(client) == current["chip_us"]


async def _fleet_busy_chip_us(client: Any) -> int:
    from sqlalchemy import func, select

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import FleetBusy

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return int((await session.execute(select(func.sum(FleetBusy.chip_us)))).scalar_one() or 0)
