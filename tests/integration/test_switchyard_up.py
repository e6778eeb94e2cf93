"""`switchyard up` on a fresh data directory: first-start keys, an authenticated call, the embedded worker."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery
from tests.support.health import wait_healthy
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


def _read_banner(proc: Any, deadline_s: float = 60) -> str:
    lines = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("API docs:"):
            return "".join(lines)
    raise AssertionError("switchyard up printed no banner:\n" + "".join(lines))


def test_up_first_start_then_restart(tmp_path: Path, start_process: Any) -> None:
    port = free_port()
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_PORT": str(port)}
    proc = start_process("up", env=env)
    banner = _read_banner(proc)
    url = f"http://127.0.0.1:{port}"
    operator_key = re.search(r"operator key:\s+(sy_\S+)", banner)
    tenant_key = re.search(r"owner key:\s+(sy_\S+)", banner)
    assert operator_key
    assert tenant_key
    assert f"{url}/schema" in banner
    curl = re.search(r"curl .*", banner)
    assert curl
    assert tenant_key.group(1) in curl.group(0)

    wait_healthy(url)
    members = httpx.get(f"{url}/v1/members", headers={"Authorization": f"Bearer {tenant_key.group(1)}"})
    assert members.status_code == 200
    assert members.json()["data"][0]["email"] == "owner@demo.example"
    tenants = httpx.get(f"{url}/v1/admin/tenants", headers={"Authorization": f"Bearer {operator_key.group(1)}"})
    assert tenants.status_code == 200
    assert httpx.get(f"{url}/readyz").status_code == 200

    # The embedded worker answers on the embedded SQLite broker.
    celery = create_celery(Settings(data_dir=tmp_path / "data"))
    assert celery.send_task("system.ping", args=["up"]).get(timeout=90)["payload"] == "up"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) is not None

    # A restart keeps the data and does not print new keys.
    proc = start_process("up", "--no-worker", env=env)
    banner = _read_banner(proc)
    assert "operator key" not in banner
    wait_healthy(url)
    again = httpx.get(f"{url}/v1/members", headers={"Authorization": f"Bearer {tenant_key.group(1)}"})
    assert again.status_code == 200
