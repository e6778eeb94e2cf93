"""Jobs leave through ``jobs.enqueue`` after the request's commit: a rolled-back request sends nothing, a committed
one sends each job exactly once, into the queue its name routes to (read back from the real broker). An API
process sends them from a thread of its own, in order, so the tests wait for the jobs they expect."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from litestar import Litestar, Request, post
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.testing import AsyncTestClient

from switchyard.platform.db import Database
from switchyard.platform.deps import DbSession, dependencies
from switchyard.platform.http.errors import InvalidRequest, exception_handlers
from switchyard.platform.jobs import BrokerSender, enqueue, jobs_for
from switchyard.platform.settings import Settings
from switchyard.platform.worker import create_celery
from switchyard.platform.worker.celery_app import MAINTENANCE_QUEUE, RUNS_QUEUE, SQLITE_BROKER_POLL_S


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


def sent_soon(settings: Settings, queue: str, count: int, timeout_s: float = 10.0) -> list[tuple[str, list[Any]]]:
    """The jobs that reach ``queue`` until ``count`` have (or ``timeout_s`` passed), then any more already there."""
    jobs: list[tuple[str, list[Any]]] = []
    deadline = time.monotonic() + timeout_s
    while len(jobs) < count and time.monotonic() < deadline:
        jobs += sent(settings, queue)
        time.sleep(0.05)
    return jobs + sent(settings, queue)


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
        assert (await client.post("/ping/committed")).status_code == 200
        # in order: the rolled-back request's job would have been sent before the committed one's
        assert sent_soon(settings, MAINTENANCE_QUEUE, 1) == [("system.ping", ["committed"])]
    assert seen_before_commit == [[], []]  # queued in the handler, not sent until the unit of work ended


async def test_a_created_run_sends_one_runs_execute(client: Any, make_tenant: Any, settings: Settings) -> None:
    tenant = await make_tenant()
    agent = await client.post(
        "/v1/agents",
        json={"name": "helper", "model": "meta-llama/Llama-3.1-8B-Instruct"},
        headers=tenant.headers("developer"),
    )
    run = (await client.post("/v1/runs", json={"agent_id": agent.json()["id"]}, headers=tenant.headers())).json()
    assert sent_soon(settings, RUNS_QUEUE, 1) == [("runs.execute", [tenant.id, run["id"]])]


def test_every_periodic_job_names_a_task_the_worker_runs(tmp_path: Any) -> None:
    app = create_celery(Settings(data_dir=tmp_path / "data"))
    app.loader.import_default_modules()  # what a worker does at start: the autodiscovered ``tasks`` modules
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert scheduled - set(app.tasks) == set()
    assert {"files.expire", "vector_stores.recover", "runs.recover"} <= scheduled


def test_a_worker_on_the_sqlite_broker_asks_for_messages_every_tenth_of_a_second(tmp_path: Any) -> None:
    """kombu's SQLite transport polls; at its default (a second) every run started up to a second late per hop."""
    app = create_celery(Settings(data_dir=tmp_path / "data"))
    with app.connection_for_read() as connection:
        assert connection.transport.polling_interval == SQLITE_BROKER_POLL_S <= 0.1
        waiting = connection.SimpleQueue(RUNS_QUEUE)  # and it polls: nothing refused the setting
        with pytest.raises(waiting.Empty):
            waiting.get(block=True, timeout=0.3)


def test_jobs_waiting_for_a_broker_that_is_away_are_bounded_the_rest_dropped_with_a_warning(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # a port nothing listens on: every publish fails after kombu's retries
        sock.bind(("127.0.0.1", 0))
        away = f"redis://127.0.0.1:{sock.getsockname()[1]}"
    sender = BrokerSender(
        Settings(data_dir=tmp_path / "data", broker_url=f"{away}/0", result_backend=f"{away}/1"), outbox_jobs=2
    )
    with caplog.at_level(logging.WARNING, logger="switchyard.platform.jobs"):
        for index in range(10):  # an API process's commits: none waits for the broker
            sender.send_soon("system.ping", [index])
        dropped = [r for r in caplog.records if "jobs wait for the broker" in r.getMessage()]
        # the sender's thread took at most one; two wait; the rest are dropped, each named for its sweeper
        assert 7 <= len(dropped) <= 8
        assert "system.ping(9,)" in dropped[-1].getMessage()
        sender.close(timeout_s=0.2)  # the broker still away: what waits is left to the sweepers
