"""A run whose worker is killed resumes ahead of a backlog of new runs, once its lease has passed.

Production shape: PostgreSQL, a Redis or RabbitMQ broker, `switchyard beat` and two `switchyard worker` processes
(default queues). One slow run starts, forty shorter runs queue behind it, and the worker holding the slow run is
killed with SIGKILL; the other worker is busy with the backlog. `runs.recover` (every 2 s, in the recovery queue
that workers take first) finds the passed lease and sends `runs.resume`, which a worker takes ahead of the
backlog. (RabbitMQ does not keep the worker's queue order: a freed thread takes from any non-empty queue, so the
resume waits for a few short runs, not for the backlog.) Asserted: the run resumed while at least ten of the backlog
were still queued; how long after the kill is printed (~5-8 s: the lease, the recovery beat and a short run or two),
not asserted, since it rests on the machine's load.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from .test_worker_redis_limits import MODEL, owner_headers

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

LEASE_S = 3.0
BACKLOG = 40


async def _run_row(database: Any, run_id: str) -> Any:
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run

    async with database.unit_of_work(UNSCOPED) as session:
        return (await session.execute(select(Run).where(Run.id == run_id))).scalar_one()


async def _queued(database: Any) -> int:
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run

    async with database.unit_of_work(UNSCOPED) as session:
        return int((await session.execute(select(func.count()).where(Run.status == "queued"))).scalar_one())


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("broker", ["redis", pytest.param("amqp", marks=pytest.mark.rabbitmq)], indirect=True)
@pytest.mark.timeout(120)
async def test_a_killed_workers_run_resumes_ahead_of_the_backlog(
    database_url: str, broker: str, production_layout: Any, start_process: Any
) -> None:
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app

    layout = production_layout(LEASE_S)
    env = layout.env
    start_process("beat", env=env)
    workers = {proc.pid: proc for proc in (start_process("worker", "-c", "2", env=env) for _ in range(2))}
    try:
        async with AsyncTestClient(app=create_app(layout.settings), base_url="http://switchyard.test") as client:
            database = client.app.state.database
            headers = await owner_headers(client, "recovery")

            async def agent_writing(max_tokens: int) -> str:
                agent = await client.post(
                    "/v1/agents",
                    json={
                        "name": f"writes-{max_tokens}",
                        "model": MODEL,
                        "model_params": {"max_tokens": max_tokens, "ignore_eos": True},  # exactly that long
                    },
                    headers=headers,
                )
                assert agent.status_code == 201, agent.text
                return str(agent.json()["id"])

            async def start_run(agent_id: str) -> str:
                body = {"agent_id": agent_id, "thread": {"messages": [{"content": "write"}]}}
                response = await client.post("/v1/runs", json=body, headers=headers)
                assert response.status_code == 201, response.text
                return str(response.json()["id"])

            short = await agent_writing(40)  # one model call of ~0.8 s
            slow = await start_run(await agent_writing(1500))  # one model call of ~30 s (~20 ms per token)
            deadline = time.monotonic() + 60
            while (holder := (await _run_row(database, slow)).lease_owner) is None:
                assert time.monotonic() < deadline, "no worker picked the run up"
                await asyncio.sleep(0.05)
            for _ in range(BACKLOG):
                await start_run(short)
            host, pid = holder.split("#")[0].rsplit(":", 1)  # host:pid#execution
            assert host == socket.gethostname()
            assert int(pid) in workers
            killed = workers.pop(int(pid))
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            killed_at = time.monotonic()
            while (run := await _run_row(database, slow)).attempts < 2:
                assert time.monotonic() - killed_at < LEASE_S + 30, "the run was not resumed"
                await asyncio.sleep(0.05)
            resumed_after_s = time.monotonic() - killed_at
            still_queued = await _queued(database)
    finally:
        for proc in workers.values():  # busy with the backlog: no warm shutdown
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    print(f"resumed {resumed_after_s:.1f} s after the kill, {still_queued} runs still queued")
    assert run.lease_owner not in (None, holder)
    assert still_queued >= 10, "the run waited for the backlog"
