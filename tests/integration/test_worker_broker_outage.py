"""A worker outlives its Redis broker going away while it acknowledges jobs: it reconnects and goes on taking jobs.

kombu's Redis transport can fail on a connection lost in the middle of an acknowledgement ("Unrecoverable error:
AttributeError: 'NoneType' object has no attribute 'hostname'"), and the worker then stopped for good; the system
test saw it in about half of its Redis outages. Here a worker acknowledging a stream of short jobs loses its broker
eight times (bounded): afterwards it must still be running and answer a job. The race is timing-dependent: before
`switchyard worker` started a stopped worker again, this failed in 2 of 3 runs. On RabbitMQ the broker closes the
worker's connections (its virtual host's, with `rabbitmqctl`), as a restart does, and the same must hold.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import free_port

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
@pytest.mark.timeout(180)
def test_a_worker_goes_on_after_rabbitmq_closes_its_connections(
    rabbitmq_vhost: str, redis_url: str, tmp_path: Path, start_process: Any
) -> None:
    """RabbitMQ closes every connection of the worker's virtual host while the worker acknowledges a stream of
    jobs (as a broker restart or a failover does): the worker reconnects each time and answers a job afterwards."""
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    from .conftest import rabbitmqctl, redis_database_of_its_own

    vhost = rabbitmq_vhost.rsplit("/", 1)[1]
    results = redis_database_of_its_own(redis_url)
    env = {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_BROKER_URL": rabbitmq_vhost,
        "SWITCHYARD_RESULT_BACKEND": results,
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
    assert app.send_task("system.ping", args=["still here"]).get(timeout=60)["payload"] == "still here"
    log = (tmp_path / "proc-0.log").read_text()
    assert "Connection to broker lost" in log, "RabbitMQ never closed the worker's connection: the test proved nothing"
