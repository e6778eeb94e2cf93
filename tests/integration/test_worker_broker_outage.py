"""A worker outlives its Redis broker going away while it acknowledges jobs: it reconnects and goes on taking jobs.

kombu's Redis transport can fail on a connection lost in the middle of an acknowledgement ("Unrecoverable error:
AttributeError: 'NoneType' object has no attribute 'hostname'"), and the worker then stopped for good; the system
test saw it in about half of its Redis outages. Here a worker acknowledging a stream of short jobs loses its broker
eight times (bounded): afterwards it must still be running and answer a job. The race is timing-dependent: before
`switchyard worker` started a stopped worker again, this failed in 2 of 3 runs. On RabbitMQ the broker closes the
worker's connections (its virtual host's, with `rabbitmqctl`), as a restart does, and the same must hold.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

from .conftest import rabbitmqctl
from .test_run_recovery import _run_row
from .test_worker_redis_limits import MODEL, owner_headers

pytestmark = [pytest.mark.slow, pytest.mark.redis]

OUTAGES = 8


def _redis(port: int, log: Path) -> subprocess.Popen[bytes]:
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    import redis

    while True:
        try:
            with redis.Redis(port=port, socket_connect_timeout=0.2) as client:
                client.ping()
            return proc
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)


@pytest.mark.timeout(240)
def test_a_worker_goes_on_after_its_broker_drops_mid_acknowledgement(
    redis_url: str, tmp_path: Path, start_process: Any
) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("this test needs `redis-server` on PATH")
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    server = _redis(port, tmp_path / "redis.log")
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_BROKER_URL": broker}
    env["SWITCHYARD_SIMULATE_IN_PROCESS"] = "1"  # one worker, its own simulated fleet
    worker = start_process("worker", "--concurrency", "4", env=env)
    app = create_celery(Settings(data_dir=tmp_path / "data", broker_url=broker))
    try:
        assert app.send_task("system.ping", args=["up"]).get(timeout=60)["payload"] == "up"
        for _ in range(OUTAGES):
            for n in range(1000):  # a stream of jobs being acknowledged when the broker goes
                app.send_task("system.ping", args=[n])
            time.sleep(0.2)
            server.kill()
            server.wait()
            time.sleep(1.0)
            server = _redis(port, tmp_path / "redis.log")
            time.sleep(1.0)
        assert worker.poll() is None, f"the worker exited ({worker.returncode}) after a broker outage"
        answer = app.send_task("system.ping", args=["still here"]).get(timeout=60)
        assert answer["payload"] == "still here"
    finally:
        server.kill()
        server.wait()


@pytest.mark.rabbitmq
@pytest.mark.redis
@pytest.mark.timeout(240)
def test_a_worker_goes_on_after_rabbitmq_closes_its_connections(
    rabbitmq_vhost: str, redis_database: str, tmp_path: Path, start_process: Any
) -> None:
    """RabbitMQ closes every connection of the worker's virtual host while the worker acknowledges a stream of
    jobs (as a broker restart or a failover does): the worker reconnects each time and answers a job afterwards."""
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    vhost = rabbitmq_vhost.rsplit("/", 1)[1]
    results = redis_database
    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_BROKER_URL": rabbitmq_vhost,
        "SWITCHYARD_RESULT_BACKEND": results,
        "SWITCHYARD_SIMULATE_IN_PROCESS": "1",  # one worker, its own simulated fleet
    }
    worker = start_process("worker", "--concurrency", "4", env=env)
    app = create_celery(Settings(data_dir=tmp_path / "data", broker_url=rabbitmq_vhost, result_backend=results))
    assert app.send_task("system.ping", args=["up"]).get(timeout=60)["payload"] == "up"
    for _ in range(3):
        for n in range(1000):  # a stream of jobs being acknowledged when the connections go
            app.send_task("system.ping", args=[n], ignore_result=True)
        time.sleep(0.2)
        rabbitmqctl("close_all_connections", "-p", vhost, "switchyard test: broker outage")
        time.sleep(1.0)
    assert worker.poll() is None, f"the worker exited ({worker.returncode}) after its connections were closed"
    _drained(vhost, worker)  # the stream is behind the last ping: on a busy machine it takes a while
    assert app.send_task("system.ping", args=["still here"]).get(timeout=60)["payload"] == "still here"
    log = (tmp_path / "proc-0.log").read_text()
    assert "Connection to broker lost" in log, "RabbitMQ never closed the worker's connection: the test proved nothing"


def _drained(vhost: str, worker: subprocess.Popen[bytes], *, stall_s: float = 30.0) -> None:
    """Wait until the worker has taken every job of the virtual host's queues, failing only when it stops making
    progress for ``stall_s`` (a stalled consumer), not when a loaded machine makes it slow."""
    left, last_progress = None, time.monotonic()
    while True:
        rows = rabbitmqctl("list_queues", "-p", vhost, "--no-table-headers", "messages", "messages_unacknowledged")
        now = sum(int(n) for line in rows.split("\n") for n in line.split())
        if now == 0:
            return
        if left is None or now < left:
            left, last_progress = now, time.monotonic()
        assert worker.poll() is None, f"the worker exited ({worker.returncode}) with {now} jobs left"
        assert time.monotonic() - last_progress < stall_s, f"the worker stopped taking jobs: {now} left"
        time.sleep(0.5)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("broker", [pytest.param("amqp", marks=pytest.mark.rabbitmq)], indirect=True)
@pytest.mark.timeout(150)
async def test_a_run_goes_on_once_when_rabbitmq_closes_its_workers_connection(
    database_url: str, broker: str, production_layout: Any, start_process: Any, tmp_path: Path
) -> None:
    """RabbitMQ closes the connection of a worker driving a run (a failover, or its `consumer_timeout`): the run's
    message is delivered again at once while the run goes on in the first worker; the second delivery finds the
    run leased and leaves it, so the run finishes once, its model call billed once."""
    from litestar.testing import AsyncTestClient
    from sqlalchemy import func, select

    from switchyard.platform.app import create_app
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import UsageEvent

    layout = production_layout(30.0)  # a lease longer than the run: no recovery, only the redelivery
    vhost = layout.broker_url.rsplit("/", 1)[1]
    for _ in range(2):
        start_process("worker", "-c", "1", env=layout.env)
    async with AsyncTestClient(app=create_app(layout.settings), base_url="http://switchyard.test") as client:
        database = client.app.state.database
        headers = await owner_headers(client, "connection-loss")
        agent = await client.post(
            "/v1/agents",
            # a ~6 s model call: exactly 300 tokens
            json={"name": "writer", "model": MODEL, "model_params": {"max_tokens": 300, "ignore_eos": True}},
            headers=headers,
        )
        body = {"agent_id": agent.json()["id"], "thread": {"messages": [{"content": "write"}]}}
        run_id = (await client.post("/v1/runs", json=body, headers=headers)).json()["id"]
        deadline = time.monotonic() + 60
        while (holder := (await _run_row(database, run_id)).lease_owner) is None:
            assert time.monotonic() < deadline, "no worker picked the run up"
            await asyncio.sleep(0.05)
        rabbitmqctl("close_all_connections", "-p", vhost, "switchyard test: connection lost mid-run")

        def deliveries() -> int:
            logs = [(tmp_path / f"proc-{n}.log").read_text() for n in range(2)]
            return sum(1 for log in logs for line in log.splitlines() if run_id in line and "received" in line)

        while (run := await _run_row(database, run_id)).status != "completed" or deliveries() < 2:
            assert run.status in ("queued", "in_progress"), run.state
            assert time.monotonic() < deadline, f"run {run.status}, delivered {deliveries()} times"
            await asyncio.sleep(0.1)
        async with database.unit_of_work(UNSCOPED) as session:
            billed = (await session.execute(select(func.count()).where(UsageEvent.run_id == run_id))).scalar_one()
    assert run.attempts == 1  # the second delivery never took the run over
    assert run.lease_owner in (None, holder)
    assert billed == 1
