"""Jobs leave through ``jobs.enqueue`` after the request's commit: a rolled-back request sends nothing, a committed
one sends each job exactly once, into the queue its name routes to (read back from the real broker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, post
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.testing import AsyncTestClient

from switchyard.platform.db import Database
from switchyard.platform.deps import DbSession, dependencies
from switchyard.platform.http.errors import InvalidRequest, exception_handlers
from switchyard.platform.jobs import enqueue, jobs_for
from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery
from switchyard.platform.worker.celery_app import MAINTENANCE_QUEUE, RUNS_QUEUE


def sent(settings: Settings, queue: str) -> list[tuple[str, list[Any]]]:
    """Take every job waiting in ``queue`` off the broker: ``(task name, args)`` in order."""
    jobs = []
    with create_celery(settings).connection_for_read() as connection:
        waiting = connection.SimpleQueue(queue)
        try:
            while True:
                message = waiting.get(block=False)
                jobs.append((message.headers["task"], message.payload[0]))
                message.ack()
        except waiting.Empty:
            pass
        finally:
            waiting.close()
    return jobs


async def test_a_rolled_back_request_sends_nothing_and_a_committed_one_sends_once(settings: Settings) -> None:
    seen_before_commit: list[list[tuple[str, list[Any]]]] = []

    @post("/ping/{word:str}", status_code=200)
    async def ping(request: Request[Any, Any, Any], db_session: DbSession, word: FromPath[str]) -> None:
        enqueue(jobs_for(request.app.state), "system.ping", word, session=db_session)
        seen_before_commit.append(sent(settings, MAINTENANCE_QUEUE))
        if word == "rolled-back":
            raise InvalidRequest("this request fails after queuing its job")

    @asynccontextmanager
    async def database(app: Litestar) -> AsyncIterator[None]:
        app.state.database = Database(settings.database_url)
        try:
            yield
        finally:
            await app.state.database.dispose()

    app = Litestar(
        route_handlers=[ping],
        dependencies=dependencies(),
        exception_handlers=exception_handlers,
        lifespan=[database],
        state=State({"settings": settings}),
    )
    async with AsyncTestClient(app=app) as client:
        assert (await client.post("/ping/rolled-back")).status_code == 400
        assert sent(settings, MAINTENANCE_QUEUE) == []
        assert (await client.post("/ping/committed")).status_code == 200
        assert sent(settings, MAINTENANCE_QUEUE) == [("system.ping", ["committed"])]
    assert seen_before_commit == [[], []]  # queued in the handler, not sent until the unit of work ended


async def test_a_created_run_sends_one_runs_execute(client: Any, make_tenant: Any, settings: Settings) -> None:
    tenant = await make_tenant()
    agent = await client.post(
        "/v1/agents",
        json={"name": "helper", "model": "meta-llama/Llama-3.1-8B-Instruct"},
        headers=tenant.headers("developer"),
    )
    run = (await client.post("/v1/runs", json={"agent_id": agent.json()["id"]}, headers=tenant.headers())).json()
    assert sent(settings, RUNS_QUEUE) == [("runs.execute", [tenant.id, run["id"]])]
