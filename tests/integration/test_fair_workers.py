"""Workers serve tenants fairly, on a real Celery worker process with one worker slot.

Background responses and agent runs are admitted when they are created: a tenant past its API key's request rate
is refused 429 then, as its foreground calls are. A tenant's backlog delays another tenant's run by at most one of
the backlog's jobs (the worker takes the next job of the tenant it served least recently). A run whose model call
must wait for a rate gives its worker back instead of waiting in it: another tenant's run completes meanwhile.

Embedded shape (a SQLite database and the SQLite broker under a data directory) unless a test says otherwise; the
rate test shares its limits through Redis, as ``compose.yaml`` does.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from .test_worker_redis_limits import MODEL, owner_headers

pytestmark = pytest.mark.slow

FINAL = ("completed", "failed", "cancelled", "incomplete", "expired")


@asynccontextmanager
async def _embedded(
    sqlite_template: Path, tmp_path: Path, start_process: Any, *, worker: bool = True, slots: int = 1, **settings: Any
) -> AsyncIterator[Any]:
    """An API client and (``worker``) one worker process with ``slots`` slots (no beat: nothing is swept), both
    configured with ``settings``."""
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app
    from switchyard.platform.settings import Settings

    database = tmp_path / "switchyard.db"
    shutil.copyfile(sqlite_template, database)
    values = {"data_dir": tmp_path / "data", "database_url": f"sqlite+aiosqlite:///{database}", **settings}
    env = {f"SWITCHYARD_{name.upper()}": str(value) for name, value in values.items()}
    if worker:
        start_process("worker", "--pool", "threads", "--concurrency", str(slots), env=env)
    async with AsyncTestClient(app=create_app(Settings(**values)), base_url="http://switchyard.test") as client:
        yield client


async def _agent(client: Any, headers: dict[str, str], name: str, **fields: Any) -> str:
    created = await client.post("/v1/agents", json={"name": name, "model": MODEL, **fields}, headers=headers)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _start_run(client: Any, headers: dict[str, str], agent_id: str, content: str = "write") -> Any:
    body = {"agent_id": agent_id, "thread": {"messages": [{"content": content}]}}
    return await client.post("/v1/runs", json=body, headers=headers)


async def _job(database: Any, job_id: str) -> Any:
    """The run's or response's row as stored now."""
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import ResponseRecord, Run

    table: Any = Run if job_id.startswith("run_") else ResponseRecord
    async with database.unit_of_work(UNSCOPED) as session:
        return (await session.execute(select(table).where(table.id == job_id))).scalar_one()


async def _until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def _billed_steps(row: Any) -> int:
    return sum(1 for step in row.state.get("steps", []) if step.get("usage"))


@pytest.mark.timeout(120)
async def test_a_tenants_fourth_background_job_a_minute_is_refused_429_when_created(
    sqlite_template: Path, tmp_path: Path, start_process: Any
) -> None:
    async with _embedded(sqlite_template, tmp_path, start_process, time_scale=0, key_requests_per_minute=3) as client:
        headers = await owner_headers(client, "background-flood")
        body = {"model": MODEL, "input": "hello", "max_output_tokens": 16, "background": True}
        accepted = [await client.post("/v1/responses", json=body, headers=headers) for _ in range(3)]
        assert [r.status_code for r in accepted] == [200, 200, 200], [r.text for r in accepted]
        refused = await client.post("/v1/responses", json=body, headers=headers)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        assert "requests per minute" in refused.json()["error"]["message"]
        assert int(refused.headers["retry-after"]) >= 1
        # the three accepted ones were admitted when created: the worker does not charge their first call again
        database = client.app.state.database
        for response in accepted:
            response_id = response.json()["id"]
            await _until(
                lambda rid=response_id: _finished(database, rid), f"background response {response_id} never finished"
            )
            assert (await _job(database, response_id)).status in ("completed", "incomplete")  # (cut at 16 tokens)


@pytest.mark.timeout(60)
async def test_a_tenants_fourth_run_a_minute_is_refused_429_when_created_and_nothing_is_stored(
    sqlite_template: Path, tmp_path: Path, start_process: Any
) -> None:
    from sqlalchemy import func

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run, Thread

    async with _embedded(
        sqlite_template, tmp_path, start_process, worker=False, time_scale=0, key_requests_per_minute=3
    ) as client:
        headers = await owner_headers(client, "run-flood")
        agent_id = await _agent(client, headers, "writer", model_params={"max_tokens": 16})
        accepted = [await _start_run(client, headers, agent_id) for _ in range(3)]
        assert [r.status_code for r in accepted] == [201, 201, 201], [r.text for r in accepted]
        refused = await _start_run(client, headers, agent_id)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        async with client.app.state.database.unit_of_work(UNSCOPED) as session:
            runs = (await session.execute(select(func.count()).select_from(Run))).scalar_one()
            threads = (await session.execute(select(func.count()).select_from(Thread))).scalar_one()
        assert (runs, threads) == (3, 3)  # the refused request stored neither its thread nor its run


async def _finished(database: Any, job_id: str) -> bool:
    return str((await _job(database, job_id)).status) in FINAL


@asynccontextmanager
async def _production(layout: Any, start_process: Any, *, slots: int = 1, **settings: Any) -> AsyncIterator[Any]:
    """The production layout (PostgreSQL, a Redis broker, Redis limits): an API client and one worker process with
    ``slots`` slots (no beat), both configured with ``settings`` too."""
    from litestar.testing import AsyncTestClient

    from switchyard.platform.app import create_app

    env = {**layout.env, **{f"SWITCHYARD_{name.upper()}": str(value) for name, value in settings.items()}}
    start_process("worker", "--pool", "threads", "--concurrency", str(slots), env=env)
    app = create_app(layout.settings.model_copy(update=settings))
    async with AsyncTestClient(app=app, base_url="http://switchyard.test") as client:
        yield client


@asynccontextmanager
async def _shape(shape: str, request: pytest.FixtureRequest, start_process: Any, **settings: Any) -> AsyncIterator[Any]:
    if shape == "embedded":
        sqlite_template, tmp_path = request.getfixturevalue("sqlite_template"), request.getfixturevalue("tmp_path")
        async with _embedded(sqlite_template, tmp_path, start_process, **settings) as client:
            yield client
    else:
        layout = request.getfixturevalue("production_layout")(30.0)
        async with _production(layout, start_process, **settings) as client:
            yield client


SHAPES = pytest.mark.parametrize(
    ("shape", "database_url"),
    [("embedded", "sqlite"), pytest.param("production", "postgres", marks=[pytest.mark.postgres, pytest.mark.redis])],
    indirect=["database_url"],
)
"""The embedded shape (its own SQLite database: ``database_url`` unused) and the production layout."""


@SHAPES
@pytest.mark.timeout(180)
async def test_another_tenants_run_starts_after_at_most_one_job_of_a_backlog(
    shape: str, database_url: str, request: pytest.FixtureRequest, start_process: Any
) -> None:
    async with _shape(shape, request, start_process, time_scale=1) as client:
        database = client.app.state.database
        flooding = await owner_headers(client, "backlog")
        waiting = await owner_headers(client, "neighbour")
        slow = await _agent(client, flooding, "slow", model_params={"max_tokens": 120, "ignore_eos": True})  # ~2.4 s
        short = await _agent(client, waiting, "short", model_params={"max_tokens": 10})
        slow_response = {"model": MODEL, "input": "write", "max_output_tokens": 120, "background": True}

        async def background_response() -> str:
            created = await client.post("/v1/responses", json=slow_response, headers=flooding)
            assert created.status_code == 200, created.text
            return str(created.json()["id"])

        async def run_of(headers: dict[str, str], agent_id: str) -> str:
            created = await _start_run(client, headers, agent_id)
            assert created.status_code == 201, created.text
            return str(created.json()["id"])

        backlog = [await background_response()]
        await _until(
            lambda: _started(database, backlog[0]), "the worker never took the backlog's first job", timeout_s=60
        )
        backlog += [await run_of(flooding, slow), await background_response(), await run_of(flooding, slow)]
        neighbour = await run_of(waiting, short)
        for job_id in [*backlog, neighbour]:
            await _until(lambda job=job_id: _finished(database, job), f"{job_id} never finished")
        started = {job_id: (await _job(database, job_id)).state["started_at_ms"] for job_id in [*backlog, neighbour]}
    ahead = [job_id for job_id in backlog if started[job_id] < started[neighbour]]
    assert len(ahead) <= 1, f"{len(ahead)} of the backlog's {len(backlog)} jobs started before the other tenant's run"


async def _started(database: Any, job_id: str) -> bool:
    return (await _job(database, job_id)).state.get("started_at_ms") is not None


@SHAPES
@pytest.mark.redis
@pytest.mark.timeout(180)
async def test_a_run_waiting_for_a_rate_gives_the_worker_to_another_tenants_run(
    shape: str, database_url: str, redis_url: str, request: pytest.FixtureRequest, start_process: Any
) -> None:
    """1,000 tokens a minute per tenant: the first run's second model call (its prompt and 560 output tokens, after
    the first call's ~620) waits ~17 s for the rate; the other tenant's run completes meanwhile. Limits are
    shared through Redis, as in production (the first call is charged by the API, the second by the worker)."""
    limits = {"redis_url": redis_url} if shape == "embedded" else {}
    async with _shape(shape, request, start_process, time_scale=0, tenant_tokens_per_minute=1000, **limits) as client:
        database = client.app.state.database
        limited = await owner_headers(client, "rate-limited")
        other = await owner_headers(client, "other")
        exact = {"max_tokens": 560, "ignore_eos": True}  # answers of exactly 560 tokens
        maths = await _agent(client, limited, "maths", tools=[{"type": "calculator"}], model_params=exact)
        waits = await _start_run(client, limited, maths, "please use calculator expression=6*7")
        assert waits.status_code == 201, waits.text
        waits_id = waits.json()["id"]

        async def first_call_done() -> bool:
            return _billed_steps(await _job(database, waits_id)) >= 1

        await _until(first_call_done, "the rate-limited run's first model call never ended")
        hello = await _agent(client, other, "hello", model_params={"max_tokens": 10})
        quick = await _start_run(client, other, hello, "hi")
        assert quick.status_code == 201, quick.text
        quick_id = quick.json()["id"]
        await _until(lambda: _finished(database, quick_id), "the other tenant's run never finished")
        assert (await _job(database, quick_id)).status == "completed"
        waiting_row = await _job(database, waits_id)
        assert waiting_row.status not in FINAL, "the rate-limited run finished first: it held the worker"
        assert _billed_steps(waiting_row) == 1
        await _until(lambda: _finished(database, waits_id), "the rate-limited run never resumed")
        done = await _job(database, waits_id)
    assert done.status == "completed"
    assert _billed_steps(done) == 2  # each model call billed once


SLOTS = 4


@SHAPES
@pytest.mark.timeout(300)
async def test_every_job_of_a_deferred_backlog_and_a_neighbours_runs_finishes_without_a_sweep(
    shape: str, database_url: str, request: pytest.FixtureRequest, start_process: Any
) -> None:
    """Four worker slots, one request in flight per tenant: of tenant A's 24 background responses one runs and
    the other slots' takes are put aside for A's slot (deferred, sent again for later), over and over, while
    tenant B starts runs one after another. Messages are spent on other jobs than their own, on jobs put aside
    and on races between the slots; still every job keeps a message that comes for it: all of them finish with
    no sweeper running (the worker runs no beat), and each of B's runs starts after at most one of A's jobs per
    slot taken since it was created."""
    async with _shape(shape, request, start_process, slots=SLOTS, time_scale=1, tenant_max_concurrency=1) as client:
        database = client.app.state.database
        flooding = await owner_headers(client, "deferred-backlog")
        neighbour = await owner_headers(client, "neighbour")
        short = await _agent(client, neighbour, "short", model_params={"max_tokens": 10})
        body = {"model": MODEL, "input": "write", "max_output_tokens": 40, "background": True}  # ~0.8 s each
        backlog = []
        for _ in range(24):
            created = await client.post("/v1/responses", json=body, headers=flooding)
            assert created.status_code == 200, created.text
            backlog.append(str(created.json()["id"]))
        backlog_deadline = time.monotonic() + 180

        def left() -> float:
            return backlog_deadline - time.monotonic()

        runs = []
        for _ in range(4):
            created = await _start_run(client, neighbour, short)
            assert created.status_code == 201, created.text
            run_id = str(created.json()["id"])
            runs.append((run_id, int(time.time() * 1000)))
            await _until(lambda job=run_id: _finished(database, job), f"B's run {run_id} never finished", 60)
        for job_id in backlog:  # one deadline for the whole backlog: its last jobs ask for a slot least often
            await _until(lambda job=job_id: _finished(database, job), f"A's response {job_id} never finished", left())
        started = {job_id: (await _job(database, job_id)).state.get("started_at_ms") for job_id in backlog}
        ran = [(await _job(database, run_id)).state["started_at_ms"] for run_id, _ in runs]
    for (run_id, created_ms), run_started in zip(runs, ran, strict=True):
        ahead = [job for job, at in started.items() if at is not None and created_ms <= at < run_started]
        assert len(ahead) <= SLOTS, f"{len(ahead)} of A's jobs started between B's run {run_id} and its start"


@SHAPES
@pytest.mark.timeout(240)
async def test_a_tenants_backlog_holds_at_most_its_share_of_the_workers_slots_and_every_job_finishes(
    shape: str, database_url: str, request: pytest.FixtureRequest, start_process: Any
) -> None:
    """Four worker slots, a share of one half: tenant A's ten background responses (~1.6 s each) run two at a
    time, never more, although two slots stand idle and nothing else waits; each of A's jobs that ends sends
    for the next (its message was parked), so all ten finish with no sweeper running (the worker runs no beat).
    Tenant B's run, started mid-backlog, starts before the backlog is through."""
    from sqlalchemy import func

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import ResponseRecord

    async with _shape(shape, request, start_process, slots=SLOTS, time_scale=1, tenant_worker_share=0.5) as client:
        database = client.app.state.database
        flooding = await owner_headers(client, "share-backlog")
        neighbour = await owner_headers(client, "share-neighbour")
        short = await _agent(client, neighbour, "short", model_params={"max_tokens": 10})
        body = {"model": MODEL, "input": "write", "max_output_tokens": 80, "background": True}
        backlog = []
        for _ in range(10):
            created = await client.post("/v1/responses", json=body, headers=flooding)
            assert created.status_code == 200, created.text
            backlog.append(str(created.json()["id"]))
        tenant_id = (await _job(database, backlog[0])).tenant_id
        held: list[int] = []

        async def count_held() -> None:
            while True:
                async with database.unit_of_work(UNSCOPED) as session:
                    running = select(func.count()).where(
                        ResponseRecord.tenant_id == tenant_id,
                        ResponseRecord.status == "in_progress",
                        ResponseRecord.lease_owner.is_not(None),  # type: ignore[union-attr]
                    )
                    held.append(int((await session.execute(running)).scalar_one()))
                await asyncio.sleep(0.02)

        counting = asyncio.create_task(count_held())
        try:
            await _until(lambda: _started(database, backlog[1]), "A's backlog never started", timeout_s=60)
            created = await _start_run(client, neighbour, short)
            assert created.status_code == 201, created.text
            run_id = str(created.json()["id"])
            await _until(lambda: _finished(database, run_id), "B's run never finished", 60)
            for job_id in backlog:
                await _until(lambda job=job_id: _finished(database, job), f"A's response {job_id} never finished", 120)
        finally:
            counting.cancel()
        ran = [(await _job(database, job_id)).state["started_at_ms"] for job_id in backlog]
        run = await _job(database, run_id)
    assert run.status == "completed"
    assert max(held) == 2, f"A held up to {max(held)} of the {SLOTS} slots at once"
    unfinished_when_b_started = [at for at in ran if at > run.state["started_at_ms"]]
    assert unfinished_when_b_started, "the backlog ended before B's run started: B's run proves nothing"
