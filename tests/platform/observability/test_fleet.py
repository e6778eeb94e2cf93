"""A real ``switchyard fleet`` process serves /metrics on its own port: its deployments' queues, replicas and KV
cache, and its request latencies; API processes then report no pool of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from switchyard.platform.app import create_app
from switchyard.platform.settings import Settings
from tests.integration.conftest import free_port
from tests.platform.conftest import bearer

SMALL = {"name": "small", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4, "replicas": 2}


@pytest.fixture
def fleet_settings(database_url: str, tmp_path: Path) -> Iterator[Settings]:
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps({"deployments": [SMALL]}))
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "SWITCHYARD_DATABASE_URL": database_url,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_FLEET_FILE": str(fleet_file),
        "SWITCHYARD_FLEET_URL": url,
        "SWITCHYARD_TIME_SCALE": "0",
    }
    with open(tmp_path / "fleet.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "fleet"], env=env, stdout=log, stderr=log
        )
        try:
            for _ in range(300):
                assert process.poll() is None, (tmp_path / "fleet.log").read_text()
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield Settings(
                data_dir=tmp_path / "data",
                database_url=database_url,
                fleet_file=str(fleet_file),
                fleet_url=url,
                time_scale=0,
            )
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


async def test_the_fleet_process_reports_its_replicas_and_the_api_process_its_requests(
    fleet_settings: Settings,
) -> None:
    async with AsyncTestClient(app=create_app(fleet_settings), base_url="http://switchyard.test") as client:
        from switchyard.platform.bootstrap import CLI_ACTOR
        from switchyard.platform.db import UNSCOPED
        from switchyard.platform.tenants.service import create_operator_key

        async with client.app.state.database.unit_of_work(UNSCOPED) as session:
            operator = bearer(await create_operator_key(session, actor=CLI_ACTOR, name="tests"))
        created = await client.post("/v1/admin/tenants", json={"name": "fleet-metrics"}, headers=operator)
        owner = bearer(created.json()["owner_key"]["value"])
        chat = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
        for _ in range(3):
            answer = await client.post("/v1/chat/completions", json=chat, headers=owner)
            assert answer.status_code == 200, answer.text
        api = _families((await client.get("/metrics")).text)

    async with httpx.AsyncClient(timeout=5) as http:
        fleet = _families((await http.get(f"{fleet_settings.fleet_url}/metrics")).text)
    replicas = {s.labels["replica"]: s.value for s in fleet["switchyard_replica_busy_ratio"].samples}
    assert set(replicas) == {"small/0", "small/1"}
    assert any(v > 0 for v in replicas.values())
    kv = fleet["switchyard_replica_kv_cache_used_ratio"].samples
    assert {s.labels["replica"] for s in kv} == {"small/0", "small/1"}
    (queued,) = fleet["switchyard_pool_queued_requests"].samples
    assert queued.labels == {"model": "small"}
    served = [
        s
        for s in fleet["switchyard_http_request_duration_seconds"].samples
        if s.name.endswith("_count") and s.labels["route"] == "/v1/chat/completions" and s.labels["status"] == "200"
    ]
    assert [s.value for s in served] == [3]

    # the API process measured the calls (TTFT by model) but leaves the replicas to the fleet process
    ttft = [s for s in api["switchyard_inference_time_to_first_token_seconds"].samples if s.name.endswith("_count")]
    assert any(s.labels["model"] == "small" and s.value >= 3 for s in ttft)
    assert not api["switchyard_replica_busy_ratio"].samples
