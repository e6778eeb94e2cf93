"""A background response whose worker is killed mid-model-call resumes on another worker, and no model call is
billed twice.

Production shape: PostgreSQL, a Redis broker, `switchyard beat` and two `switchyard worker` processes. The
response calls the built-in calculator (model step 0, tool step 1) and then writes a long answer (model step 2,
~25 s at time scale 1). The worker holding it is killed with SIGKILL during step 2; `responses.recover` finds the
passed lease and a worker resumes from the last checkpoint: step 0 is not repeated, step 2 is asked for again.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from typing import Any

import pytest
from sqlalchemy import select

from .test_worker_redis_limits import MODEL, owner_headers

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

LEASE_S = 3.0


async def _row(database: Any, response_id: str) -> Any:
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import ResponseRecord

    async with database.unit_of_work(UNSCOPED) as session:
        return (await session.execute(select(ResponseRecord).where(ResponseRecord.id == response_id))).scalar_one()


async def _usage(database: Any, tenant_id: str) -> list[Any]:
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import UsageEvent

    async with database.unit_of_work(UNSCOPED) as session:
        rows = await session.execute(select(UsageEvent).where(UsageEvent.tenant_id == tenant_id))
        return list(rows.scalars())


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.timeout(150)
async def test_a_killed_workers_background_response_resumes_and_bills_each_model_call_once(
    database_url: str, start_process: Any, production_layout: Any
) -> None:
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app

    layout = production_layout(LEASE_S)
    env = layout.env
    start_process("beat", env=env)
    workers = {proc.pid: proc for proc in (start_process("worker", "-c", "1", env=env) for _ in range(2))}
    try:
        async with AsyncTestClient(app=create_app(layout.settings), base_url="http://switchyard.test") as client:
            database = client.app.state.database
            headers = await owner_headers(client, "response-recovery")
            created = await client.post(
                "/v1/responses",
                json={
                    "model": MODEL,
                    "input": "Use calculator with expression=6*7",
                    "tools": [{"type": "calculator"}],
                    "max_output_tokens": 1200,
                    "background": True,
                },
                headers=headers,
            )
            assert created.status_code == 200, created.text
            response_id = created.json()["id"]
            deadline = time.monotonic() + 60
            while True:  # the long answer (model step 2) is under way
                row = await _row(database, response_id)
                steps = row.state.get("steps", [])
                if len(steps) == 3 and row.lease_owner is not None:
                    break
                assert row.status in ("queued", "in_progress"), row.status
                assert time.monotonic() < deadline, "no worker reached the response's second model call"
                await asyncio.sleep(0.05)
            holder = row.lease_owner
            host, pid = holder.split("#")[0].rsplit(":", 1)  # host:pid#execution
            assert host == socket.gethostname()
            killed = workers.pop(int(pid))
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            while (row := await _row(database, response_id)).status in ("queued", "in_progress"):
                assert time.monotonic() - deadline < 90, "the response was not resumed and finished"
                await asyncio.sleep(0.1)
            finished = await client.get(f"/v1/responses/{response_id}", headers=headers)
            usage = await _usage(database, row.tenant_id)
    finally:
        for proc in workers.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    body = finished.json()
    assert body["status"] in ("completed", "incomplete")
    assert [item["type"] for item in body["output"]] == ["mcp_call", "message"]
    assert row.lease_owner != holder
    billed = [step["id"] for step in row.state["steps"] if step.get("usage")]
    assert billed == [f"{response_id}_step_0", f"{response_id}_step_2"]
    assert sorted(event.event_id for event in usage) == billed  # each model call once, the repeated one too
    assert sum(event.chip_us for event in usage) == body["usage"]["compute"]["chip_us"]
