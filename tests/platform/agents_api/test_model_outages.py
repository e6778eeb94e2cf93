"""A model backend that is briefly away (answering 503 while it restarts, or refusing connections) is waited out:
the run goes on when it is back, its model step billed once, instead of failing with ``model_error`` at the
first refused call. In a worker the run is put aside meanwhile (its slot free); elsewhere the call is repeated
after a backoff. A backend that stays away ends the run at its own time limit."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlmodel import col

from switchyard.accelerator.pool.echo_upstream import EchoUpstream
from switchyard.platform.db import UNSCOPED
from switchyard.platform.execution.admitted import AdmissionDeferred
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.execution.outages import LONGEST_WAIT_S
from switchyard.platform.inference.runtime import build_pool
from switchyard.platform.models import Run, UsageEvent, utc_now
from switchyard.platform.runs.executor import execute_run
from tests.platform.agents_api.factories import make_agent, run_inline
from tests.support.ports import free_port
from tests.support.served import served

MODEL = "upstream/flaky"


class Restarting:
    """An OpenAI-compatible upstream that answers 503 to its first ``failures`` chat completions."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.echo = EchoUpstream()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.calls += 1
            if self.calls <= self.failures:
                headers = [(b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": b'{"error": {"message": "restarting"}}'})
                return
        await self.echo(scope, receive, send)


@pytest.fixture
def upstream() -> Iterator[tuple[Restarting, str]]:
    app = Restarting(failures=3)
    with served(app) as url:
        yield app, f"{url}/v1"


@pytest.fixture
def base_url(request: pytest.FixtureRequest) -> str:
    """Where the model's upstream is: the restarting one, or (``"refusing"``) a port nothing listens on yet."""
    if getattr(request, "param", None) == "refusing":
        return f"http://127.0.0.1:{free_port()}/v1"
    return str(request.getfixturevalue("upstream")[1])


@pytest.fixture
def settings(settings: Any, tmp_path: Path, base_url: str, shared_apps: Any) -> Any:
    """The app's settings with one model, served by the upstream at ``base_url``."""
    deployment = {"name": MODEL, "backend": "openai-compatible", "base_url": base_url, "context_window": 4096}
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"deployments": [deployment]}))
    return shared_apps.settings(data_dir=settings.data_dir, database_url=settings.database_url, fleet_file=str(path))


async def _usage(client: Any) -> list[UsageEvent]:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars().all())


async def _run_row(client: Any, run_id: str) -> Run:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        row: Run = (await session.execute(select(Run).where(col(Run.id) == run_id))).scalar_one()
    return row


async def _start_run(client: Any, tenant: Any) -> dict[str, Any]:
    agent = await make_agent(client, tenant, model=MODEL)
    body = {"agent_id": agent["id"], "thread": {"messages": [{"role": "user", "content": "Hello."}]}}
    created = await client.post("/v1/runs", json=body, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text
    return dict(created.json())


async def _finished(client: Any, tenant: Any, run: dict[str, Any]) -> dict[str, Any]:
    path = f"/v1/threads/{run['thread_id']}/runs/{run['id']}"
    deadline = time.monotonic() + 60
    while (found := (await client.get(path, headers=tenant.headers("developer"))).json())["status"] in (
        "queued",
        "in_progress",
    ):
        assert time.monotonic() < deadline, "the run never finished"
        await asyncio.sleep(0.05)
    return dict(found)


async def test_a_run_outlasts_an_upstream_answering_503_and_its_step_is_billed_once(
    client: Any, make_tenant: Any, upstream: tuple[Restarting, str]
) -> None:
    run_inline(client)
    tenant = await make_tenant()
    run = await _start_run(client, tenant)
    found = await _finished(client, tenant, run)
    assert found["status"] == "completed", found.get("last_error")  # before: failed, model_error on the first 503
    assert upstream[0].calls == 4  # three refused while it restarted, then the answer
    [usage] = await _usage(client)
    assert usage.run_id == run["id"]


async def test_in_a_worker_a_run_whose_upstream_is_away_is_put_aside_and_goes_on_once_it_is_back(
    client: Any, make_tenant: Any, upstream: tuple[Restarting, str]
) -> None:
    tenant = await make_tenant()
    run = await _start_run(client, tenant)  # no dispatcher runs it: this test drives it as a worker would
    pool = build_pool(client.app.state.settings)  # a worker's own, on this loop
    env = RunEnvironment(
        database=client.app.state.database,
        pool=pool,
        admission=client.app.state.gateway.admission,
        lease_s=30,
        worker=True,
    )
    upstream[0].failures = 1
    try:
        await _put_aside_then_resumed(client, env, run, upstream[0])
    finally:
        await pool.aclose()


async def _put_aside_then_resumed(client: Any, env: RunEnvironment, run: dict[str, Any], upstream: Restarting) -> None:
    tenant_id = (await _run_row(client, run["id"])).tenant_id
    with pytest.raises(AdmissionDeferred) as deferred:
        await execute_run(env, tenant_id=tenant_id, run_id=run["id"])
    assert deferred.value.code == "model_unreachable"
    assert deferred.value.until <= utc_now() + timedelta(seconds=LONGEST_WAIT_S)
    row = await _run_row(client, run["id"])
    assert (row.status, row.lease_owner) == ("in_progress", None)  # put aside, holding nothing
    assert row.lease_expires_at is not None
    assert await _usage(client) == []

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:  # its time came, as if it waited
        await session.execute(update(Run).where(col(Run.id) == run["id"]).values(lease_expires_at=utc_now()))
    await asyncio.sleep(0.01)
    assert await execute_run(env, tenant_id=tenant_id, run_id=run["id"]) == "completed"
    assert upstream.calls == 2
    [usage] = await _usage(client)
    assert usage.run_id == run["id"]


@pytest.mark.parametrize("base_url", ["refusing"], indirect=True)
async def test_a_run_waits_for_an_upstream_that_refuses_connections_until_it_listens(
    client: Any, make_tenant: Any, base_url: str
) -> None:
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    upstream = Restarting(failures=0)
    run_inline(client)
    tenant = await make_tenant()
    run = await _start_run(client, tenant)
    stop = threading.Event()

    def start_later() -> None:
        time.sleep(1.5)  # several calls refused meanwhile
        with served(upstream, port=port):
            stop.wait(30)

    starter = threading.Thread(target=start_later, daemon=True)
    starter.start()
    try:
        found = await _finished(client, tenant, run)
    finally:
        stop.set()
        starter.join(timeout=15)
    assert found["status"] == "completed", found.get("last_error")
    assert upstream.calls == 1
    assert len(await _usage(client)) == 1


async def test_a_foreground_response_outlasts_an_upstream_answering_503_through_the_same_kernel(
    client: Any, make_tenant: Any, upstream: tuple[Restarting, str]
) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "input": "Hello."}
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "completed", answer.json().get("error")
    assert upstream[0].calls == 4
    assert len(await _usage(client)) == 1
