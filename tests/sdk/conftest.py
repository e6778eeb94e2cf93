"""A real Switchyard installation for the SDK: `switchyard up` (API, embedded Celery worker, SQLite) in a
subprocess on 127.0.0.1, started once per session, plus a small cutting proxy for the resume tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True)
class Installation:
    base_url: str  # .../v1
    operator_key: str
    owner_key: str
    env: dict[str, str]  # the installation's settings, for `switchyard` commands against it


@pytest.fixture(scope="session")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    data = tmp_path_factory.mktemp("sdk-up")
    port = free_port()
    log_path = data / "up.log"
    env = {
        **os.environ,
        "SWITCHYARD_DATA_DIR": str(data / "data"),
        "SWITCHYARD_PORT": str(port),
        "SWITCHYARD_TIME_SCALE": "0",
        "SWITCHYARD_DATABASE_URL": "",
        "SWITCHYARD_BROKER_URL": "",
        "SWITCHYARD_REDIS_URL": "",
        "SWITCHYARD_FLEET_URL": "",
    }
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "up"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        keys = _wait_for_banner(log_path, proc)
        _wait_until_healthy(f"http://127.0.0.1:{port}")
        yield Installation(f"http://127.0.0.1:{port}/v1", keys["operator"], keys["owner"], env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_banner(log_path: Path, proc: subprocess.Popen[bytes]) -> dict[str, str]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        text = log_path.read_text()
        operator = re.search(r"operator key:\s+(sy_op\S+)", text)
        owner = re.search(r"owner key:\s+(sy_\S+)", text)
        if operator and owner and "API docs:" in text:
            return {"operator": operator.group(1), "owner": owner.group(1)}
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("switchyard up did not print its keys:\n" + log_path.read_text())


def _wait_until_healthy(url: str) -> None:
    for _ in range(300):
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the API never became ready")
