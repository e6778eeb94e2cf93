"""The API in front of a real `switchyard fleet` process (SQLite and PostgreSQL): the fleet simulates, the API
meters, the fleet records busy time, and the books reconcile; the operator's fleet view and reload reach it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from switchyard.platform.app import create_app
from switchyard.platform.billing.ledger import rate_events
from switchyard.platform.billing.periods import month_start
from switchyard.platform.billing.reconcile import reconcile
from switchyard.platform.bootstrap import CLI_ACTOR
from switchyard.platform.db import UNSCOPED
from switchyard.platform.settings import Settings
from switchyard.platform.tenants.service import create_operator_key
from tests.platform.conftest import bearer
from tests.support.health import wait_healthy
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

SMALL = {"name": "small", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4, "replicas": 2}
OTHER = {"name": "other", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4}


@pytest.fixture
def fleet_settings(database_url: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings of an API process whose simulated deployments live in a `switchyard fleet` process."""
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps({"deployments": [SMALL]}))
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "SWITCHYARD_DATABASE_URL": database_url,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_FLEET_FILE": str(fleet_file),
        "SWITCHYARD_FLEET_URL": url,
        "SWITCHYARD_FLEET_TOKEN": "t0ken",
        "SWITCHYARD_TIME_SCALE": "0",
    }
    log = (tmp_path / "fleet.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "switchyard.platform.cli", "fleet"], env=env, stdout=log, stderr=log
    )
    wait_healthy(url, process=process, log=tmp_path / "fleet.log")
    yield Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        fleet_file=str(fleet_file),
        fleet_url=url,
        fleet_token="t0ken",
        time_scale=0,
    )
    process.send_signal(signal.SIGTERM)
    try:  # a loaded CI machine has taken over 10 s; what is checked is a clean exit
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has stopped
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()  # reaped: no "subprocess is still running" warning in the next test
        log.close()


def _write_fleet(settings: Settings, deployments: list[dict[str, Any]]) -> None:
    Path(settings.fleet_file).write_text(json.dumps({"deployments": deployments}))


def _chat(model: str = "small", content: str = "hello there") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8}


async def _keys(client: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Operator headers and a new tenant's owner headers."""
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        operator = bearer(await create_operator_key(session, actor=CLI_ACTOR, name="tests"))
    created = await client.post("/v1/admin/tenants", json={"name": "fleet-users"}, headers=operator)
    assert created.status_code == 201, created.text
    return operator, bearer(created.json()["owner_key"]["value"])


async def test_the_fleet_process_simulates_and_records_and_the_books_reconcile(fleet_settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(fleet_settings), base_url="http://switchyard.test") as client:
        operator, headers = await _keys(client)
        answers = [await client.post("/v1/chat/completions", json=_chat(), headers=headers) for _ in range(5)]
        stream = await client.post("/v1/chat/completions", json={**_chat(), "stream": True}, headers=headers)
        assert [a.status_code for a in answers] == [200] * 5
        assert stream.text.rstrip().endswith("data: [DONE]")
        chip_us = sum(a.json()["usage"]["compute"]["chip_us"] for a in answers)
        assert {a.json()["usage"]["compute"]["replica"] for a in answers} <= {"small/0", "small/1"}

        fleet = (await client.get("/v1/admin/fleet", headers=operator)).json()["deployments"]
        assert sum(r["chip_us"] for r in fleet[0]["replicas"]) >= chip_us  # the fleet process's own replicas

        database = client.app.state.database
        await client.app.state.gateway.drain()
        async with database.unit_of_work(UNSCOPED) as session:
            assert (await rate_events(session, event_ids=None, limit=100)).rated == 6
        deadline = time.monotonic() + 10
        while True:  # the fleet process records its busy time every second (none recorded yet is no discrepancy)
            async with database.unit_of_work(UNSCOPED) as session:
                report = await reconcile(session, period_start=month_start(datetime.now(UTC)))
            recorded = report.fleet_busy_chip_us.get("trn2.3xlarge") == report.attributed_chip_us.get("trn2.3xlarge")
            if (report.ok and recorded) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert report.ok, report.render()
        busy, attributed = report.fleet_busy_chip_us.get("trn2.3xlarge"), report.attributed_chip_us.get("trn2.3xlarge")
        assert busy == attributed, report.render()
        assert attributed is not None
        assert attributed > chip_us
        assert client.app.state.gateway.pool.busy_chip_us() == {}  # the API process simulates nothing itself


async def test_reload_through_the_api_reloads_the_fleet_process(fleet_settings: Settings) -> None:
    async with AsyncTestClient(app=create_app(fleet_settings), base_url="http://switchyard.test") as client:
        operator, headers = await _keys(client)
        _write_fleet(fleet_settings, [SMALL, OTHER])
        reloaded = await client.post("/v1/admin/fleet/reload", headers=operator)
        assert reloaded.status_code == 200, reloaded.text
        assert {d["model"] for d in reloaded.json()["deployments"]} == {"small", "other"}
        answer = await client.post("/v1/chat/completions", json=_chat("other"), headers=headers)
        assert answer.status_code == 200, answer.text

        _write_fleet(fleet_settings, [{"name": "bad", "model": "nope"}])
        rejected = await client.post("/v1/admin/fleet/reload", headers=operator)
        assert rejected.status_code == 400
        assert rejected.json()["error"]["code"] == "invalid_fleet"
        still = await client.post("/v1/chat/completions", json=_chat("other"), headers=headers)
        assert still.status_code == 200
