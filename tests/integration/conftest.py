"""Helpers for tests that start real processes (Celery workers, `switchyard up`)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


@dataclass
class ProductionLayout:
    """The production layout's variables for the processes a test starts (``env``) and the same as ``settings`` for
    its in-process API: PostgreSQL, Redis for limits, a Redis database of its own as the broker (another test
    run's workers must not take these jobs), time scale 1 (~20 ms per output token) and a short run lease."""

    env: dict[str, str]
    settings: Any
    broker_url: str


@pytest.fixture
def production_layout(
    database_url: str, redis_url: str, tmp_path: Path
) -> Iterator[Callable[[float], ProductionLayout]]:
    """``make(lease_s)``: the layout's variables; the broker's queues are emptied at teardown."""
    from sqlalchemy.engine import make_url

    from switchyard.platform.settings import Settings

    broker_url = make_url(redis_url).set(database=str(random.randint(1, 14))).render_as_string(hide_password=False)

    def make(lease_s: float) -> ProductionLayout:
        env = {
            "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
            "SWITCHYARD_DATABASE_URL": database_url,
            "SWITCHYARD_BROKER_URL": broker_url,
            "SWITCHYARD_REDIS_URL": redis_url,
            "SWITCHYARD_TIME_SCALE": "1",
            "SWITCHYARD_AGENT_RUN_LEASE_SECONDS": str(lease_s),
        }
        settings = Settings(
            data_dir=tmp_path / "data",
            database_url=database_url,
            broker_url=broker_url,
            redis_url=redis_url,
            agent_run_lease_seconds=lease_s,
        )
        return ProductionLayout(env=env, settings=settings, broker_url=broker_url)

    yield make
    import redis

    from switchyard.platform.worker.celery_app import QUEUES

    redis.Redis.from_url(broker_url).delete(*QUEUES)
