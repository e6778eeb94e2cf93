"""Helpers for tests that start real processes (Celery workers, `switchyard up`), and the brokers they share.

RabbitMQ suites run when ``SWITCHYARD_TEST_RABBITMQ_URL`` is set (``.ci/run`` sets it), as PostgreSQL and Redis do
(tests/conftest.py): skipped and named at the end of the run otherwise, failed when the URL is set but RabbitMQ
does not answer. Each test gets a virtual host of its own, made and deleted with ``rabbitmqctl`` (RabbitMQ on this
machine), so concurrent runs never share a queue.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _skip_suite

RABBITMQ_ENV = "SWITCHYARD_TEST_RABBITMQ_URL"
BROKERS = ("redis", "amqp")
"""The production brokers ``production_layout`` runs on (``broker`` fixture; Redis unless parametrized)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"rabbitmq: needs RabbitMQ ({RABBITMQ_ENV}) and rabbitmqctl")


@pytest.fixture
def start_process(tmp_path: Path) -> Iterator[Any]:
    """Start ``python -m switchyard.platform.cli ...`` processes; all are stopped at teardown."""
    started: list[subprocess.Popen[str]] = []
    logs: list[Any] = []

    def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
        log = open(tmp_path / f"proc-{len(started)}.log", "w")  # noqa: SIM115 (closed at teardown)
        logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", *args],
            env={**os.environ, **env},
            stdout=subprocess.PIPE if args[0] == "up" else log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()
    for log in logs:
        log.close()


def rabbitmqctl(*args: str) -> str:
    """Run ``rabbitmqctl`` against this machine's RabbitMQ; its output."""
    command = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    if not os.path.exists(command):
        pytest.fail(f"{RABBITMQ_ENV} is set but rabbitmqctl is not installed (it makes each test's virtual host)")
    done = subprocess.run([command, "-q", *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"rabbitmqctl {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    url = os.environ.get(RABBITMQ_ENV)
    if not url:
        _skip_suite("rabbitmq", f"{RABBITMQ_ENV} is not set")
    from kombu import Connection

    with Connection(url, connect_timeout=3) as connection:  # fail loudly if configured but down
        connection.ensure_connection(max_retries=1)
    return str(url)


@pytest.fixture
def rabbitmq_vhost(rabbitmq_url: str) -> Iterator[str]:
    """The URL of a RabbitMQ virtual host private to the test (its user may do anything there); deleted, with
    every queue and message in it, at teardown. Name it (or ``production_layout``) before ``start_process`` in a
    test's arguments, so that its workers stop before their virtual host goes."""
    from urllib.parse import quote

    from kombu.utils.url import url_to_parts

    parts = url_to_parts(rabbitmq_url)
    user, password = parts.username or "guest", parts.password or "guest"
    vhost = f"switchyard-test-{uuid.uuid4().hex[:12]}"
    rabbitmqctl("add_vhost", vhost)
    try:
        rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        address = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}"
        yield f"{parts.scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{address}/{vhost}"
    finally:
        rabbitmqctl("delete_vhost", vhost)


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> str:
    """Which production broker ``production_layout`` uses: ``redis`` unless a test parametrizes it (indirect)."""
    name = str(getattr(request, "param", "redis"))
    assert name in BROKERS, name
    return name


@dataclass
class ProductionLayout:
    """The production layout's variables for the processes a test starts (``env``) and the same as ``settings`` for
    its in-process API: PostgreSQL, Redis for limits, a broker of its own (another test run's workers must not
    take these jobs: a Redis database, or a RabbitMQ virtual host with a Redis database as the result backend, as
    docs/operations.md says), time scale 1 (~20 ms per output token) and a short run lease."""

    env: dict[str, str]
    settings: Any
    broker_url: str


@pytest.fixture
def production_layout(
    database_url: str,
    redis_url: str,
    redis_database: str,
    broker: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Callable[[float], ProductionLayout]:
    """``make(lease_s)``: the layout's variables."""
    from switchyard.platform.settings import Settings

    results_url = redis_database
    broker_url = request.getfixturevalue("rabbitmq_vhost") if broker == "amqp" else results_url

    def make(lease_s: float) -> ProductionLayout:
        env = {
            "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
            "SWITCHYARD_DATABASE_URL": database_url,
            "SWITCHYARD_BROKER_URL": broker_url,
            "SWITCHYARD_RESULT_BACKEND": results_url,
            "SWITCHYARD_REDIS_URL": redis_url,
            "SWITCHYARD_TIME_SCALE": "1",
            "SWITCHYARD_AGENT_RUN_LEASE_SECONDS": str(lease_s),
            # each worker simulates its own fleet (no fleet process): these tests are about leases, brokers and
            # recovery, not about reconciling the fleet's busy time (tests/system runs the layout with one)
            "SWITCHYARD_SIMULATE_IN_PROCESS": "1",
        }
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=database_url,
            broker_url=broker_url,
            result_backend=results_url,
            redis_url=redis_url,
            agent_run_lease_seconds=lease_s,
        )
        return ProductionLayout(env=env, settings=settings, broker_url=broker_url)

    return make  # (the Redis database is emptied when given back, a virtual host deleted)
