"""A real ``switchyard fleet`` process serves /metrics on its own port: its deployments' queues, replicas and KV
cache, and its request latencies; API processes then report no pool of their own. Its spans continue the trace of
the API process's model call."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from switchyard.platform.app import create_app
from switchyard.platform.observability.tracing import flush_tracing
from switchyard.platform.settings import Settings
from tests.platform.conftest import bearer
from tests.support.health import wait_healthy
from tests.support.ports import free_port

pytestmark = pytest.mark.slow  # a `switchyard fleet` process

SMALL = {"name": "small", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4, "replicas": 2}
BGE = {"name": "bge", "model": "BAAI/bge-large-en-v1.5", "task": "embeddings", "tp": 1}


@pytest.fixture
def fleet_settings(database_url: str, tmp_path: Path, otlp_receiver: Any) -> Iterator[Settings]:
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps({"deployments": [SMALL, BGE]}))
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "SWITCHYARD_DATABASE_URL": database_url,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_FLEET_FILE": str(fleet_file),
        "SWITCHYARD_FLEET_URL": url,
        "SWITCHYARD_TIME_SCALE": "0",
        "SWITCHYARD_OTLP_ENDPOINT": otlp_receiver.endpoint,
    }
    with open(tmp_path / "fleet.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard.platform.cli", "fleet"], env=env, stdout=log, stderr=log
        )
        try:
            wait_healthy(url, process=process, log=tmp_path / "fleet.log")
            yield Settings(
                data_dir=tmp_path / "data",
                database_url=database_url,
                fleet_file=str(fleet_file),
                fleet_url=url,
                time_scale=0,
                otlp_endpoint=otlp_receiver.endpoint,
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


async def _owner(client: AsyncTestClient[Any]) -> dict[str, str]:
    """The headers of a new tenant's owner key."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tenants.service import create_operator_key

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        operator = bearer(await create_operator_key(session, actor=CLI_ACTOR, name="tests"))
    created = await client.post("/v1/admin/tenants", json={"name": "fleet"}, headers=operator)
    return bearer(created.json()["owner_key"]["value"])


CHAT = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}


async def test_the_fleet_process_reports_its_replicas_and_the_api_process_its_requests(
    fleet_settings: Settings,
) -> None:
    async with AsyncTestClient(app=create_app(fleet_settings), base_url="http://switchyard.test") as client:
        owner = await _owner(client)
        chat = CHAT
        for _ in range(3):
            answer = await client.post("/v1/chat/completions", json=chat, headers=owner)
            assert answer.status_code == 200, answer.text
        api = _families((await client.get("/metrics")).text)

    async with httpx.AsyncClient(timeout=5) as http:
        fleet = _families((await http.get(f"{fleet_settings.fleet_url}/metrics")).text)
    replicas = {s.labels["replica"]: s.value for s in fleet["switchyard_replica_busy_ratio"].samples}
    assert set(replicas) == {"small/0", "small/1", "bge/0"}
    assert any(v > 0 for v in replicas.values())
    kv = fleet["switchyard_replica_kv_cache_used_ratio"].samples
    assert {s.labels["replica"] for s in kv} == {"small/0", "small/1", "bge/0"}
    queued = fleet["switchyard_pool_queued_requests"].samples
    assert sorted(s.labels["model"] for s in queued) == ["bge", "small"]
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


async def test_a_model_call_on_the_fleet_process_continues_the_callers_trace(
    fleet_settings: Settings, otlp_receiver: Any
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    async with AsyncTestClient(app=create_app(fleet_settings), base_url="http://switchyard.test") as client:
        owner = await _owner(client)
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/embeddings", {"model": "bge", "input": "hello"})):
            traced = {**owner, "traceparent": f"00-{trace_id}-{parent_id}-01"}
            answer = await client.post(path, json=body, headers=traced)
            assert answer.status_code == 200, answer.text
        assert flush_tracing()

    calls = {s.name: s for s in otlp_receiver.spans if s.trace_id == trace_id and s.service == "switchyard-api"}
    assert {"chat small", "embeddings bge"} <= set(calls)
    for _ in range(100):  # the fleet process exports its spans in batches, every few seconds
        served = [s for s in otlp_receiver.spans if s.trace_id == trace_id and s.service == "switchyard-fleet"]
        if len(served) >= 2:
            break
        await asyncio.sleep(0.1)
    # each request the fleet served is a child of the API process's model call that sent it
    assert sorted(s.parent_span_id for s in served) == sorted(
        calls[n].span_id for n in ("chat small", "embeddings bge")
    )
    assert all(s.kind == 2 for s in served)  # SERVER
