"""A real `switchyard api` process whose Redis (limits and broker, as in compose.yaml) stops mid-request: new
requests get 503 with ``retry-after``, the requests in flight finish, and SIGTERM stops the process within 10 s."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.platform.limits.servers import RedisServer, make_tenant_over_http
from tests.support.health import wait_healthy
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IN_FLIGHT = 3
EXIT_BOUND_S = 10.0


def _chat(**extra: Any) -> dict[str, Any]:
    # 150 tokens: ~3 s on the simulated trn2 replicas (~20 ms per token), in flight through the outage and the
    # SIGTERM, and well inside the API's 5 s shutdown grace
    hi = [{"role": "user", "content": "hi"}]
    return {"model": MODEL, "messages": hi, "max_tokens": 150, "ignore_eos": True, **extra}  # all 150 tokens


async def _first_token(http: httpx.AsyncClient, started: asyncio.Event, done: list[str]) -> None:
    """Stream a completion; say when its first token arrived; keep every ``data:`` payload."""
    async with http.stream("POST", "/v1/chat/completions", json=_chat(stream=True)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                done.append(line[5:].strip())
                if len(done) == 2:  # the role chunk, then a token: the request is running
                    started.set()


async def test_api_answers_503_in_a_redis_outage_and_exits_promptly_on_sigterm(
    tmp_path: Path, start_process: Any
) -> None:
    redis_server = RedisServer()
    redis_server.start()
    try:
        await _scenario(tmp_path, start_process, redis_server)
    finally:
        redis_server.stop()


async def _scenario(tmp_path: Path, start_process: Any, redis_server: RedisServer) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    database_url = f"sqlite+aiosqlite:///{data_dir / 'switchyard.db'}"
    base = f"redis://127.0.0.1:{redis_server.port}"
    env = {
        "SWITCHYARD_DATA_DIR": str(data_dir),
        "SWITCHYARD_DATABASE_URL": database_url,
        "SWITCHYARD_PORT": str(port),
        "SWITCHYARD_BROKER_URL": f"{base}/0",  # the production layout: one Redis for the broker and the limits
        "SWITCHYARD_REDIS_URL": f"{base}/1",
        "SWITCHYARD_TIME_SCALE": "1",  # tokens take their simulated time: requests are in flight for seconds
        "SWITCHYARD_SIMULATE_IN_PROCESS": "1",  # one API process, its own simulated fleet: no reconciliation here
    }
    data_dir.mkdir()
    upgrade = start_process("db", "upgrade", env=env)
    assert await asyncio.to_thread(upgrade.wait, timeout=120) == 0
    api = start_process("api", env=env)
    url = f"http://127.0.0.1:{port}"
    await asyncio.to_thread(wait_healthy, url, process=api)
    _tenant_id, headers = await make_tenant_over_http(url, database_url)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        warm = await http.post("/v1/chat/completions", json=_chat(max_tokens=8))
        assert warm.status_code == 200, warm.text  # the limits (and the broker, for rating) are in Redis
        started = [asyncio.Event() for _ in range(IN_FLIGHT)]
        payloads: list[list[str]] = [[] for _ in range(IN_FLIGHT)]
        streams = [asyncio.create_task(_first_token(http, started[n], payloads[n])) for n in range(IN_FLIGHT)]
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in started)), timeout=30)
        redis_server.stop()

        refused = await http.post("/v1/chat/completions", json=_chat())
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["code"] == "limits_unavailable"

        api.send_signal(signal.SIGTERM)  # while the streams are still running
        sent_at = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*streams), timeout=EXIT_BOUND_S)
    for data in payloads:
        assert data[-1] == "[DONE]"
        assert json.loads(data[-2])["choices"][0]["finish_reason"] == "length"
    try:
        await asyncio.to_thread(api.wait, timeout=max(0.1, EXIT_BOUND_S - (time.monotonic() - sent_at)))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"switchyard api still running {EXIT_BOUND_S:.0f} s after SIGTERM") from None
