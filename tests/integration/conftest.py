"""Helpers for tests that start real processes (Celery workers, `switchyard up`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
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
