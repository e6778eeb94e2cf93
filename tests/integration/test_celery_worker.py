"""A real Celery worker process round-trips a task on the embedded SQLite broker, on Redis and on RabbitMQ (with a
Redis result backend, as docs/operations.md asks for)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery

pytestmark = pytest.mark.slow


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("amqp", marks=[pytest.mark.rabbitmq, pytest.mark.redis]),
    ]
)
def worker_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_SIMULATE_IN_PROCESS": "1"}  # no model calls
    if request.param == "redis":
        env["SWITCHYARD_BROKER_URL"] = request.getfixturevalue("redis_database")
    if request.param == "amqp":
        env["SWITCHYARD_BROKER_URL"] = request.getfixturevalue("rabbitmq_vhost")
        env["SWITCHYARD_RESULT_BACKEND"] = request.getfixturevalue("redis_database")
    return env


def test_real_worker_round_trips_a_task(worker_env: dict[str, str], start_process: Any) -> None:
    worker = start_process("worker", "--pool", "solo", env=worker_env)
    settings = Settings(
        data_dir=Path(worker_env["SWITCHYARD_DATA_DIR"]),
        broker_url=worker_env.get("SWITCHYARD_BROKER_URL", ""),
        result_backend=worker_env.get("SWITCHYARD_RESULT_BACKEND", ""),
    )
    app = create_celery(settings)
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    result = app.send_task("system.ping", args=[{"hello": "worker"}])
    reply = result.get(timeout=90)
    assert reply["payload"] == {"hello": "worker"}
    assert reply["pid"] == worker.pid  # it ran in the worker process, not here


@pytest.mark.parametrize(("setting", "increment"), [(None, 10), ("0", 0)])
def test_worker_threads_run_at_the_lower_cpu_priority_of_background_work(
    setting: str | None, increment: int, tmp_path: Path, start_process: Any
) -> None:
    """A job runs on a pool thread of ``switchyard worker`` niced by ``SWITCHYARD_WORKER_NICE`` (10 unless set),
    so a backlog of background jobs yields the cores to requests that are waited on."""
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_SIMULATE_IN_PROCESS": "1"}
    if setting is not None:
        env["SWITCHYARD_WORKER_NICE"] = setting
    start_process("worker", "--pool", "threads", "--concurrency", "2", env=env)
    app = create_celery(Settings(data_dir=tmp_path / "data"))
    reply = app.send_task("system.ping", args=[None]).get(timeout=90)
    assert reply["nice"] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + increment)
