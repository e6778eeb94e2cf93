"""The one admission path: a refusal at any step gives back what the steps before it took; waiting holds nothing."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, Backend, DeploymentSpec
from switchyard.platform.admission import (
    Admission,
    LimitsOutage,
    ModelCall,
    ModelNotFound,
    NoRateCard,
    admit_waiting,
    model_backend,
    served_models,
)
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.limits import (
    MemoryConcurrency,
    MemoryRateLimiter,
    RedisConcurrency,
    api_key_limit_key,
    tenant_limit_key,
)
from switchyard.platform.settings import Settings
from tests.platform.limits.servers import RedisServer

TOKENS_PER_MINUTE = 600
REQUESTS_PER_MINUTE = 60


@pytest.mark.parametrize("name", ["access", "budget_holds", "calls", "rates", "refusals", "service", "waiting", ""])
def test_public_names_exist(name: str) -> None:
    module = importlib.import_module("switchyard.platform.admission" + (f".{name}" if name else ""))
    for public in module.__all__:
        assert hasattr(module, public), f"{module.__name__}.__all__ names missing {public!r}"


class Clock:
    """A clock that moves only when something sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
async def pool() -> AsyncIterator[AcceleratorPool]:
    restricted = DeploymentSpec(
        name="private", model="meta-llama/Llama-3.1-8B", instance="trn2.3xlarge", tp=4, tenants=("ten_other",)
    )
    pool = AcceleratorPool.from_specs([DEFAULT_FLEET[0], restricted], time_scale=0)
    yield pool
    await pool.aclose()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A Redis of the test's own, which it stops."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


def _settings(database: Database, tmp_path: Path, **limits: Any) -> Settings:
    values = {"tenant_tokens_per_minute": TOKENS_PER_MINUTE, "key_requests_per_minute": REQUESTS_PER_MINUTE} | limits
    return Settings(data_dir=tmp_path / "data", database_url=database.url, **values)


def _call(backend: Backend, tenant_id: str = "ten_a", holder: str = "call-1") -> ModelCall:
    return ModelCall(
        scope=TenantScope(tenant_id),
        api_key_id="key_a",
        agent_id=None,
        backend=backend,
        prompt_tokens=20,
        output_tokens=40,
        holder=holder,
    )


async def _untouched(rates: MemoryRateLimiter, tenant_id: str = "ten_a") -> bool:
    """Whether the key's request rate and the tenant's tokens are both full (looking spends nothing)."""
    tokens = await rates.hit(tenant_limit_key(tenant_id), rate=TOKENS_PER_MINUTE, period_s=60.0, cost=0)
    requests = await rates.hit(api_key_limit_key("key_a"), rate=REQUESTS_PER_MINUTE, period_s=60.0, cost=0)
    return tokens.remaining == TOKENS_PER_MINUTE and requests.remaining == REQUESTS_PER_MINUTE


def test_model_access_is_one_check(pool: AcceleratorPool) -> None:
    assert [b.name for b in served_models(pool, "ten_a")] == [DEFAULT_FLEET[0].name]
    assert [b.name for b in served_models(pool, "ten_other")] == [DEFAULT_FLEET[0].name, "private"]
    assert model_backend(pool, "private", "ten_other").name == "private"
    with pytest.raises(ModelNotFound) as hidden:
        model_backend(pool, "private", "ten_a")
    with pytest.raises(ModelNotFound) as missing:
        model_backend(pool, "no-such-model", "ten_a")
    assert (hidden.value.code, hidden.value.param) == ("model_not_found", "model")
    assert hidden.value.message == f"unknown model 'private'. Known: {DEFAULT_FLEET[0].name}."  # not told apart
    assert "private" not in missing.value.message  # another tenant's models are never suggested


async def test_an_outage_after_the_rates_refunds_them(
    pool: AcceleratorPool, database: Database, tmp_path: Path, redis_server: RedisServer
) -> None:
    import redis.asyncio as redis

    client = redis.Redis.from_url(redis_server.url, socket_connect_timeout=1)
    rates = MemoryRateLimiter(Clock())
    admission = Admission(
        database=database, settings=_settings(database, tmp_path), rates=rates, slots=RedisConcurrency(client)
    )
    try:
        redis_server.stop()  # the slots' Redis is gone: the rates were charged, the slot cannot be decided
        with pytest.raises(LimitsOutage) as refused:
            await admission.admit(_call(pool.backend(DEFAULT_FLEET[0].name)))
        assert refused.value.status_code == 503
        assert refused.value.headers == {"retry-after": "2"}
        assert await _untouched(rates)
    finally:
        await client.aclose()


async def test_no_rate_card_after_the_rates_and_the_slot_gives_both_back(
    client: Any, make_tenant: Any, database: Database, tmp_path: Path
) -> None:
    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 10**6}, headers=tenant.headers())
    assert budget.status_code == 201, budget.text
    unpriced = AcceleratorPool.from_specs(
        [DeploymentSpec(name="unpriced", model="meta-llama/Llama-3.1-8B", instance="trn3-gen1-ultraserver", tp=4)],
        time_scale=0,
    )
    rates, slots = MemoryRateLimiter(Clock()), MemoryConcurrency()
    admission = Admission(database=database, settings=_settings(database, tmp_path), rates=rates, slots=slots)
    try:
        with pytest.raises(NoRateCard) as refused:  # the catalog has no default price for this instance type
            await admission.admit(_call(unpriced.backend("unpriced"), tenant_id=tenant.id))
        assert refused.value.code == "no_rate_card"
        assert await _untouched(rates, tenant.id)
        assert slots.in_flight(tenant_limit_key(tenant.id)) == 0
    finally:
        await unpriced.aclose()


class SlotFreedLater(Clock):
    """Another request holds the tenant's only slot until the waiting call's third pause; meanwhile the tenant's
    tokens and the key's requests must be whole (waiting holds nothing)."""

    def __init__(self, slots: MemoryConcurrency) -> None:
        super().__init__()
        self.slots = slots
        self.rates: MemoryRateLimiter | None = None
        self.whole_while_waiting: list[bool] = []

    async def sleep(self, seconds: float) -> None:
        assert self.rates is not None
        self.whole_while_waiting.append(await _untouched(self.rates))
        await super().sleep(seconds)
        if len(self.sleeps) == 3:
            await self.slots.release(tenant_limit_key("ten_a"), "another-request")


async def test_a_waiting_call_holds_nothing_while_it_waits(
    pool: AcceleratorPool, database: Database, tmp_path: Path
) -> None:
    slots = MemoryConcurrency()
    assert await slots.acquire(tenant_limit_key("ten_a"), 1, "another-request")
    clock = SlotFreedLater(slots)
    clock.rates = rates = MemoryRateLimiter(clock)
    settings = _settings(database, tmp_path, tenant_max_concurrency=1)
    admission = Admission(database=database, settings=settings, rates=rates, slots=slots)
    holds = await admit_waiting(admission, _call(pool.backend(DEFAULT_FLEET[0].name)), sleep=clock.sleep)
    assert clock.whole_while_waiting == [True, True, True]
    assert not await _untouched(rates)  # admitted: now it has taken its request and tokens
    await admission.finish(holds, billed=False)
    assert slots.in_flight(tenant_limit_key("ten_a")) == 0
