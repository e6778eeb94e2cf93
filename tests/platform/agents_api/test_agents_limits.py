"""Agent runs are admitted by the gateway's admission: a model call waits for its tenant's token rate, its API
key's request rate and a request slot, in the same limiters as `/v1/chat/completions`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, Backend
from switchyard.agents import FunctionModel, Message, ModelCallRefused, ModelParams, ModelRequest
from switchyard.platform.admission import Admission
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.execution.admitted import AdmittedModel
from switchyard.platform.limits import MemoryConcurrency, MemoryRateLimiter, tenant_limit_key
from switchyard.platform.settings import Settings
from tests.platform.agents_api.factories import make_agent, wait_for_run

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


class Timeline:
    """The limiter's clock and the waiting model's sleep on one simulated timeline."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    pool = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0)
    yield pool.backend(DEFAULT_FLEET[0].name)
    await pool.aclose()


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """The database budget holds are looked up in (tenant ``t1`` has none)."""
    database = Database(database_url)
    yield database
    await database.dispose()


def _limited(
    backend: Backend,
    database: Database,
    timeline: Timeline,
    *,
    tokens_per_minute: int = 1_000,
    requests_per_minute: int = 6_000,
    slots: int = 4,
    concurrency: MemoryConcurrency | None = None,
    api_key_id: str | None = None,
) -> tuple[AdmittedModel, list[float]]:
    settings = Settings(
        database_url=database.url,
        tenant_tokens_per_minute=tokens_per_minute,
        key_requests_per_minute=requests_per_minute,
        tenant_max_concurrency=slots,
    )
    admission = Admission(
        database=database,
        settings=settings,
        rates=MemoryRateLimiter(timeline),
        slots=concurrency or MemoryConcurrency(),
    )
    called_at: list[float] = []

    def answer(request: ModelRequest) -> str:
        called_at.append(timeline.now)
        return "ok"

    model = AdmittedModel(
        FunctionModel(answer),
        admission=admission,
        scope=TenantScope("t1"),
        backend=backend,
        api_key_id=api_key_id,
        agent_id="agent_1",
        sleep=timeline.sleep,
    )
    return model, called_at


def _request(max_tokens: int) -> ModelRequest:
    return ModelRequest(model="m", messages=(Message.user("hi"),), params=ModelParams(max_tokens=max_tokens))


async def test_a_call_waits_for_the_tenants_token_rate(backend: Backend, database: Database) -> None:
    timeline = Timeline()
    model, called_at = _limited(backend, database, timeline, tokens_per_minute=1_000)
    await model.request(_request(600))
    await model.request(_request(600))  # 2 x ~605 tokens > the 1,000 a full bucket holds
    assert called_at[0] == 0.0
    assert 10 < called_at[1] < 20  # ~210 tokens at 1,000 per minute
    assert called_at[1] == pytest.approx(sum(timeline.sleeps))


async def test_a_call_that_can_never_fit_fails_the_run_with_a_clear_code(backend: Backend, database: Database) -> None:
    timeline = Timeline()
    model, called_at = _limited(backend, database, timeline, tokens_per_minute=1_000)
    with pytest.raises(ModelCallRefused) as refused:
        await model.request(_request(2_000))
    assert refused.value.code == "request_exceeds_token_limit"  # the same check as a chat completion's 400
    assert "1000 tokens per minute" in str(refused.value)
    assert called_at == []
    assert timeline.sleeps == []  # refused at once: no wait would ever fit it


async def test_a_call_waits_for_its_api_keys_request_rate(backend: Backend, database: Database) -> None:
    timeline = Timeline()
    model, called_at = _limited(
        backend, database, timeline, tokens_per_minute=10**6, requests_per_minute=2, api_key_id="k1"
    )
    for _ in range(3):
        await model.request(_request(10))
    assert called_at[:2] == [0.0, 0.0]
    assert called_at[2] == pytest.approx(30.0)  # 2 per minute: one more every 30 s


class SlotFreedLater(Timeline):
    """Another request of the tenant holds the only slot and ends after the waiting call's third pause."""

    def __init__(self, concurrency: MemoryConcurrency, slot: str, holder: str) -> None:
        super().__init__()
        self.concurrency, self.slot, self.holder = concurrency, slot, holder

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        if len(self.sleeps) == 3:
            await self.concurrency.release(self.slot, self.holder)


async def test_a_call_waits_for_a_request_slot_and_gives_it_back(backend: Backend, database: Database) -> None:
    concurrency = MemoryConcurrency()
    slot = tenant_limit_key("t1")
    assert await concurrency.acquire(slot, 1, "another-request")
    timeline = SlotFreedLater(concurrency, slot, "another-request")
    model, called_at = _limited(backend, database, timeline, tokens_per_minute=10**6, slots=1, concurrency=concurrency)
    await model.request(_request(10))
    assert len(timeline.sleeps) == 3
    assert called_at == [pytest.approx(sum(timeline.sleeps))]
    assert concurrency.in_flight(slot) == 0


@pytest.fixture
def settings(database_url: str, tmp_path: Path, shared_apps: Any) -> Any:
    """The app of this module allows 600 tokens per tenant per minute (10 a second)."""
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url, tenant_tokens_per_minute=600)


async def test_runs_and_chat_completions_draw_on_one_token_rate(
    client: Any, make_tenant: Any, inline_runs: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(client, tenant, model_params={"max_tokens": 200})
    run = (await client.post("/v1/runs", json={"agent_id": agent["id"]}, headers=headers)).json()
    run = await wait_for_run(client, run["thread_id"], run["id"], headers, statuses=FINAL)
    assert run["status"] == "completed"
    assert client.app.state.gateway.admission.slots.in_flight(tenant_limit_key(tenant.id)) == 0
    chat = await client.post(
        "/v1/chat/completions",
        json={"model": agent["model"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10},
        headers=headers,
    )
    assert chat.status_code == 200, chat.text
    # 600 minus the run's call (its prompt and 200 output tokens) minus this one's, plus a few seconds' refill
    assert int(chat.headers["x-ratelimit-remaining-tokens"]) < 600 - 200 - 10
