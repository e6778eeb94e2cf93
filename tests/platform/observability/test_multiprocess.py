"""``switchyard api --workers 2``: either process answers /metrics with the requests both of them served."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.ports import free_port

pytestmark = pytest.mark.slow
UPSTREAM_ONLY = {"name": "up", "backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "chips": 1}


@pytest.fixture
def api(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[str, Path]]:
    """Two API processes on one port (no simulated deployment, so no fleet process is needed); yields the URL and
    the metrics directory."""
    shutil.copyfile(sqlite_template, tmp_path / "switchyard.db")
    (tmp_path / "fleet.json").write_text(json.dumps({"deployments": [UPSTREAM_ONLY]}))
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999999.db").write_bytes(b"left over by an earlier run")  # emptied at start
    port = free_port()
    env = {
        **os.environ,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'switchyard.db'}",
        "SWITCHYARD_FLEET_FILE": str(tmp_path / "fleet.json"),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "api.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "api", "--workers", "2", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(600):
                assert process.poll() is None, (tmp_path / "api.log").read_text()
                try:
                    if httpx.get(f"{url}/metrics", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            for _ in range(600):  # one process answering says nothing of the other: each logs its startup
                if (tmp_path / "api.log").read_text().count("Application startup complete") >= 2:
                    break
                time.sleep(0.1)
            yield url, metrics_dir
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _healthz_count(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "switchyard_http_request_duration_seconds_count" and s.labels["route"] == "/healthz"
    )


def test_every_process_answers_the_scrape_with_both_processes_requests(api: tuple[str, Path]) -> None:
    url, metrics_dir = api

    def healthz(_: int) -> int:
        with httpx.Client() as client:  # a connection each, so both processes accept some
            return client.get(f"{url}/healthz", headers={"connection": "close"}).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(healthz, range(120))) == {200}

    recorded_by = {path.stem.rsplit("_", 1)[1] for path in metrics_dir.glob("histogram_*.db")}
    assert len(recorded_by) == 2  # both processes served requests
    assert not (metrics_dir / "counter_999999.db").exists()
    assert [_healthz_count(url) for _ in range(6)] == [120.0] * 6  # whichever process answers
