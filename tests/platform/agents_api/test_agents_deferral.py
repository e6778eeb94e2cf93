"""In a worker, a model call that must wait for admission puts its job aside instead of waiting in the worker slot;
a background job's first call, whose rates were charged when the job was created, takes only its slot."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, Backend
from switchyard.agents import FunctionModel, Message, ModelCallInterrupted, ModelParams, ModelRequest
from switchyard.platform.admission import Admission, TryLater
from switchyard.platform.admission.waiting import SLOT_RETRY_MAX_S, SLOT_RETRY_S, retry_in_s
from switchyard.platform.db import Database, TenantScope
from switchyard.platform.execution.admitted import AdmissionDeferred, AdmittedModel
from switchyard.platform.limits import MemoryConcurrency, MemoryRateLimiter, tenant_limit_key
from switchyard.platform.models import utc_now
from switchyard.platform.settings import Settings


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    pool = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0)
    yield pool.backend(DEFAULT_FLEET[0].name)
    await pool.aclose()


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


def _admission(database: Database, *, requests_per_minute: int, slots: MemoryConcurrency) -> Admission:
    settings = Settings(
        database_url=database.url, key_requests_per_minute=requests_per_minute, tenant_max_concurrency=1
    )
    return Admission(database=database, settings=settings, rates=MemoryRateLimiter(lambda: 0.0), slots=slots)


def _model(backend: Backend, admission: Admission, calls: list[str], **options: object) -> AdmittedModel:
    def answer(request: ModelRequest) -> str:
        calls.append(request.request_id)
        return "ok"

    return AdmittedModel(
        FunctionModel(answer),
        admission=admission,
        scope=TenantScope("t1"),
        backend=backend,
        api_key_id="k1",
        agent_id="agent_1",
        defer=True,
        **options,  # type: ignore[arg-type]
    )


def _request(step: str) -> ModelRequest:
    return ModelRequest(model="m", messages=(Message.user("hi"),), params=ModelParams(max_tokens=10), request_id=step)


async def test_a_call_refused_by_a_rate_raises_the_deferral_and_takes_nothing(
    backend: Backend, database: Database
) -> None:
    slots = MemoryConcurrency()
    calls: list[str] = []
    model = _model(backend, _admission(database, requests_per_minute=1, slots=slots), calls)
    await model.request(_request("s0"))
    before = utc_now()
    with pytest.raises(AdmissionDeferred) as deferred:
        await model.request(_request("s1"))
    assert isinstance(deferred.value, ModelCallInterrupted)  # the run stops at its checkpoint, not failed
    assert deferred.value.code == "rate_limit_exceeded"
    assert before + timedelta(seconds=50) < deferred.value.until < before + timedelta(seconds=61)  # 1 a minute
    assert calls == ["s0"]
    assert slots.in_flight(tenant_limit_key("t1")) == 0


async def test_the_first_call_of_a_job_admitted_at_creation_is_not_charged_its_rates_again(
    backend: Backend, database: Database
) -> None:
    calls: list[str] = []
    admission = _admission(database, requests_per_minute=1, slots=MemoryConcurrency())
    creation = await admission.admit(await _model(backend, admission, [])._call(_request("creation")))
    await admission.finish(creation, billed=False)  # what POST does: the key's one request of the minute stays
    model = _model(backend, admission, calls, rates_charged=True)
    await model.request(_request("s0"))  # not refused: its rates were charged at creation
    with pytest.raises(AdmissionDeferred):
        await model.request(_request("s1"))  # the next call is charged
    assert calls == ["s0"]


async def test_a_call_refused_a_slot_is_put_aside_longer_the_longer_its_job_waited(
    backend: Backend, database: Database
) -> None:
    slots = MemoryConcurrency()
    assert await slots.acquire(tenant_limit_key("t1"), 1, "another-request")
    long_ago = utc_now() - timedelta(seconds=40)
    model = _model(backend, _admission(database, requests_per_minute=600, slots=slots), [], waiting_since=long_ago)
    with pytest.raises(AdmissionDeferred) as deferred:
        await model.request(_request("s0"))
    assert deferred.value.code == "concurrency_limit_exceeded"
    assert deferred.value.until > utc_now() + timedelta(seconds=8)  # a quarter of the ~40 s it waited
    refused = TryLater("full", code="concurrency_limit_exceeded", retry_after_s=None, headers={})
    assert retry_in_s(refused, waited_s=0) == SLOT_RETRY_S
    assert retry_in_s(refused, waited_s=3600) == SLOT_RETRY_MAX_S


def test_a_deferral_ends_at_the_runs_time_limit_when_that_comes_first() -> None:
    from switchyard.agents import AgentSpec, RunState
    from switchyard.platform.execution.admitted import time_limit_of

    spec = AgentSpec.model_validate({"name": "a", "model": "m", "limits": {"timeout_s": 30}})
    started = utc_now().replace(microsecond=0)
    state = RunState(run_id="r", created_at_ms=0, started_at_ms=int(started.timestamp() * 1000))
    limit = time_limit_of(spec, state)
    assert limit == started + timedelta(seconds=30)
    waits_long = AdmissionDeferred("rate_limit_exceeded", started + timedelta(seconds=60))
    assert waits_long.capped(limit).until == limit  # resumed at its limit, it stops as incomplete there
    waits_briefly = AdmissionDeferred("rate_limit_exceeded", started + timedelta(seconds=5))
    assert waits_briefly.capped(limit) is waits_briefly
    assert time_limit_of(spec, RunState(run_id="r", created_at_ms=0)) is None  # not started: no limit yet
