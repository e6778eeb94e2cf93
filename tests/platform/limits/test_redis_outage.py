"""When the limiters' Redis goes away: new requests get 503 with ``retry-after``, requests already running finish
(streams with ``[DONE]``, others with their whole body), agent model calls wait, and all comes back with Redis."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, Backend
from switchyard.agents import FunctionModel, Message, ModelParams, ModelRequest
from switchyard.platform.admission import admission_for
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.execution.admitted import AdmittedModel
from switchyard.platform.limits import tenant_limit_key
from switchyard.platform.models import UsageEvent
from tests.platform.limits.servers import RedisServer, ServedApp

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
OUTPUT_TOKENS = 400  # at time_scale 1 a request runs for a few hundred milliseconds
STREAMS = 3
PLAIN = 3


def _chat(**extra: Any) -> dict[str, Any]:
    hi = [{"role": "user", "content": "hi"}]
    return {"model": MODEL, "messages": hi, "max_tokens": OUTPUT_TOKENS, "ignore_eos": True, **extra}  # all of them


@pytest.fixture
def settings(database_url: str, tmp_path: Path, redis_server: RedisServer) -> Any:
    """The app's limiters live in the test's own Redis; tokens take their simulated time."""
    from switchyard.platform.settings import Settings

    return Settings(data_dir=tmp_path / "data", database_url=database_url, time_scale=1.0, redis_url=redis_server.url)


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def test_a_redis_outage_refuses_new_requests_with_503_and_lets_running_ones_finish(
    served_app: ServedApp, redis_server: RedisServer
) -> None:
    url = "/v1/chat/completions"
    async with httpx.AsyncClient(base_url=served_app.url, headers=served_app.headers, timeout=60) as http:
        streams = [asyncio.create_task(http.post(url, json=_chat(stream=True))) for _ in range(STREAMS)]
        plain = [asyncio.create_task(http.post(url, json=_chat())) for _ in range(PLAIN)]
        gateway = served_app.app.state.gateway
        await _until(lambda: gateway.running == STREAMS + PLAIN, "every request is running")
        redis_server.stop()  # mid-request: every request above is running

        refused = await http.post(url, json=_chat())
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["code"] == "limits_unavailable"
        assert refused.json()["error"]["type"] == "api_error"

        answers = await asyncio.wait_for(asyncio.gather(*streams, *plain), timeout=60)
        for answer in answers[:STREAMS]:
            assert answer.status_code == 200
            data = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
            assert data[-1] == "[DONE]"
            chunks = [json.loads(d) for d in data[:-1]]
            assert not [c for c in chunks if "error" in c]
            assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        for answer in answers[STREAMS:]:
            assert answer.status_code == 200, answer.text
            assert answer.json()["usage"]["completion_tokens"] == OUTPUT_TOKENS

        redis_server.start()  # empty: the slots of the requests above went with the old Redis
        again = await http.post(url, json=_chat(max_tokens=8))
        assert again.status_code == 200, again.text
        assert "x-ratelimit-remaining-tokens" in again.headers

    billed = await _usage_event_ids(served_app)
    assert len(billed) == STREAMS + PLAIN + 1  # every answered request once; the refused one not at all


async def _usage_event_ids(served: ServedApp) -> list[str]:
    database = Database(served.app.state.settings.database_url)
    try:
        async with database.unit_of_work(UNSCOPED) as session:
            return list((await session.execute(select(UsageEvent.event_id))).scalars())
    finally:
        await database.dispose()


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    pool = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0)
    yield pool.backend(DEFAULT_FLEET[0].name)
    await pool.aclose()


async def test_an_agent_model_call_waits_out_a_redis_outage(
    backend: Backend, redis_server: RedisServer, settings: Any
) -> None:
    import redis.asyncio as redis

    database = Database(settings.database_url)
    admission = admission_for(settings, database)
    client = redis.Redis.from_url(redis_server.url)
    pauses: list[float] = []
    outage_over = asyncio.Event()

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 3:  # Redis comes back while the call waits
            redis_server.start()
            outage_over.set()
        await asyncio.sleep(0)

    model = AdmittedModel(
        FunctionModel(lambda request: "ok"),
        admission=admission,
        scope=TenantScope("t1"),
        backend=backend,
        api_key_id="k1",
        agent_id="agent_1",
        sleep=sleep,
    )
    request = ModelRequest(
        model="m", messages=(Message.user("hi"),), params=ModelParams(max_tokens=10), request_id="run_1_step_0"
    )
    try:
        redis_server.stop()
        response = await asyncio.wait_for(model.request(request), timeout=30)
        assert response.message.content == "ok"
        assert outage_over.is_set()
        assert pauses[:3] == [0.5, 1.0, 2.0]  # it waited, backing off, instead of failing the run
        assert int(await client.zcard("sy:cc:" + tenant_limit_key("t1"))) == 0  # and gave its slot back
    finally:
        await client.aclose()
        await admission.aclose()
        await database.dispose()
