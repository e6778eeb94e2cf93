"""Leases and the sweeper: which runs are re-enqueued, and a worker's heartbeat during a long model call."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from switchyard.agents import Message, ModelRequest, ModelResponse, ToolCall, Usage
from switchyard.platform.db import UNSCOPED
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.models import Run, utc_now
from switchyard.platform.runs.executor import execute_run
from switchyard.platform.runs.tasks import sweep_runs
from tests.platform.agents_api.factories import make_agent


class _Nowhere:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, args: list[str]) -> None:
        self.sent.append(args[1])


class _SlowModel:
    """Answers after ``delay_s`` (an upstream slower than the lease)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def request(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.delay_s)
        if request.tools and request.messages[-1].role != "tool":  # first use the calculator, if it has one
            call = ToolCall(id="call_1", name="calculator", arguments='{"expression": "1+1"}')
            return ModelResponse(message=Message.assistant(None, [call]), usage=Usage(input_tokens=5), chip_us=50)
        return ModelResponse(message=Message.assistant("late but fine"), usage=Usage(input_tokens=5), chip_us=50)


async def _set_lease(database: Any, run_id: str, owner: str | None, seconds: float | None) -> None:
    expires = None if seconds is None else utc_now() + timedelta(seconds=seconds)
    async with database.unit_of_work(UNSCOPED) as session:
        await session.execute(update(Run).where(Run.id == run_id).values(lease_owner=owner, lease_expires_at=expires))


async def test_sweeper_and_leases(client: Any, make_tenant: Any) -> None:
    client.app.state.jobs = _Nowhere()
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant)
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    database = client.app.state.database

    assert (tenant.id, run["id"]) in await sweep_runs(database, grace_s=0)  # never picked up
    assert (tenant.id, run["id"]) not in await sweep_runs(database, grace_s=60)  # not yet: its task may be coming
    await _set_lease(database, run["id"], "dead-worker", -1)
    assert (tenant.id, run["id"]) in await sweep_runs(database, grace_s=60)  # lease passed

    gateway = client.app.state.gateway
    env = RunEnvironment(database=database, pool=gateway.pool, admission=gateway.admission, lease_s=0.3, worker_id="me")
    await _set_lease(database, run["id"], "live-worker", 30)
    assert (tenant.id, run["id"]) not in await sweep_runs(database, grace_s=0)
    assert await execute_run(env, tenant_id=tenant.id, run_id=run["id"]) == "leased"

    await _set_lease(database, run["id"], "dead-worker", -1)
    env.model_factory = lambda _tenant, _thread: _SlowModel(delay_s=1.0)
    task = asyncio.create_task(execute_run(env, tenant_id=tenant.id, run_id=run["id"]))
    await asyncio.sleep(0.8)  # longer than the lease: the heartbeat keeps it
    assert (tenant.id, run["id"]) not in await sweep_runs(database, grace_s=0)
    assert await task == "completed"
    body = (await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}", headers=headers)).json()
    assert body["status"] == "completed"
    assert body["chip_us"] == 50
    assert await execute_run(env, tenant_id=tenant.id, run_id=run["id"]) == "finished"  # redelivery: no-op
    assert (tenant.id, run["id"]) not in await sweep_runs(database, grace_s=0)


async def test_two_deliveries_of_a_run_in_one_process(client: Any, make_tenant: Any) -> None:
    """A run dispatched twice at once in one process (its creation and the end of the run before it on its thread)
    is driven by one of the two; the other is told it is leased and leaves the lease alone."""
    client.app.state.jobs = _Nowhere()
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    env = RunEnvironment(
        database=client.app.state.database,
        pool=client.app.state.gateway.pool,
        admission=client.app.state.gateway.admission,
        lease_s=30,
        worker_id="one-process",
        model_factory=lambda _tenant, _thread: _SlowModel(delay_s=0.2),
    )
    outcomes = await asyncio.gather(*(execute_run(env, tenant_id=tenant.id, run_id=run["id"]) for _ in range(2)))
    assert sorted(outcomes) == ["completed", "leased"]
    body = (await client.get(f"/v1/threads/{run['thread_id']}/runs/{run['id']}", headers=headers)).json()
    assert body["status"] == "completed"
    assert body["chip_us"] == 100  # two model calls, each billed once


async def test_cancel_while_a_worker_drives_the_run(client: Any, make_tenant: Any) -> None:
    client.app.state.jobs = _Nowhere()
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    path = f"/v1/threads/{run['thread_id']}/runs/{run['id']}"
    env = RunEnvironment(
        database=client.app.state.database,
        pool=client.app.state.gateway.pool,
        admission=client.app.state.gateway.admission,
        lease_s=30,
        model_factory=lambda _tenant, _thread: _SlowModel(delay_s=0.5),
    )
    task = asyncio.create_task(execute_run(env, tenant_id=tenant.id, run_id=run["id"]))
    for _ in range(100):
        if (await client.get(path, headers=headers)).json()["status"] == "in_progress":
            break
        await asyncio.sleep(0.01)
    cancelling = await client.post(f"{path}/cancel", headers=headers)
    assert cancelling.json()["status"] == "cancelling"  # its worker holds it: cancelled at its next step
    assert await task == "cancelled"
    body = (await client.get(path, headers=headers)).json()
    assert body["status"] == "cancelled"
    assert body["chip_us"] == 50  # the call in flight finished and is billed


async def test_cancel_of_a_run_whose_worker_died(client: Any, make_tenant: Any) -> None:
    client.app.state.jobs = _Nowhere()
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant)
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    await _set_lease(client.app.state.database, run["id"], "dead-worker", -1)
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(update(Run).where(Run.id == run["id"]).values(status="in_progress"))
    cancelled = await client.post(f"/v1/threads/{run['thread_id']}/runs/{run['id']}/cancel", headers=headers)
    assert cancelled.json()["status"] == "cancelled"


async def test_event_stream_pings_while_nothing_happens(client: Any, make_tenant: Any) -> None:
    from switchyard.platform.db import TenantScope
    from switchyard.platform.runs.stream import run_events

    client.app.state.jobs = _Nowhere()  # no worker: the run stays queued
    tenant = await make_tenant()
    agent = await make_agent(client, tenant)
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=tenant.headers())).json()
    stream = run_events(client.app.state.database, TenantScope(tenant.id), run["id"], poll_s=0.01, ping_s=0.05)
    chunks = [await anext(stream) for _ in range(3)]
    await stream.aclose()
    assert chunks[0].startswith(b"id: 1\nevent: thread.run.created\n")
    assert chunks[1].startswith(b"id: 2\nevent: thread.run.queued\n")
    assert chunks[2] == b": ping\n\n"
