"""Durable agent runs on real Celery worker processes, killed with SIGKILL at random points.

50 runs (20 on RabbitMQ) of an agent with a calculator, an ``http_request`` tool and an MCP tool (servers on
127.0.0.1, reached through the SSRF guard with a loopback allowance that exists only in this test's worker
process) are sent to a worker; the test kills the worker at random moments while runs progress, starts a new
one, and plays the sweeper (not on RabbitMQ: there the broker's redelivery of the killed worker's jobs must do
it alone). Every run must complete, every model step must be billed exactly once, and the MCP tool (not
idempotent: at most once) must never have run twice for one run.

Run as a script, this file is the worker: ``python test_agent_runs_durable.py`` starts ``switchyard worker``
with the test resolver and loopback allowance installed.
"""

from __future__ import annotations

import asyncio
import collections
import random
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

RESOLVER = {"mcp.test": ["127.0.0.1"], "api.test": ["127.0.0.1"]}
SIZES = {"sqlite": (50, 8), "redis": (50, 8), "amqp": (20, 4)}
"""Runs and kills by broker. RabbitMQ's run is smaller: what it adds is its own redelivery (a killed worker's
unacknowledged jobs go back to the queue as its connection closes); checkpoints and billing are the same code."""
STALL_S = 120.0
"""The runs are stuck when none checkpoints or finishes this long; a busy machine only makes them slower (runs took
133-426 s in the whole suite, four tests at a time on two cores)."""
MCP_HITS: list[str] = []
HTTP_HITS: list[str] = []


def _worker_main() -> None:
    from switchyard.agents import StaticResolver
    from switchyard.platform.cli import main
    from switchyard.platform.execution import worker

    worker.TOOL_OPTIONS.update(resolver=StaticResolver(RESOLVER), allow_loopback=True)
    main(["worker", "--pool", "solo"])


if __name__ == "__main__":
    _worker_main()
    sys.exit(0)

# below the script part: run as a worker, this file is not in a package and imports nothing of the tests'
from tests.support.script_process import ScriptProcess  # noqa: E402

pytestmark = pytest.mark.slow


def _serve(app: Any) -> tuple[Any, threading.Thread, int]:
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "test server did not start"
        time.sleep(0.01)
    return server, thread, int(server.servers[0].sockets[0].getsockname()[1])


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    mcp = MCPServer("switchyard-chaos")

    @mcp.tool()
    def record(key: str) -> str:
        """Record a key (a side effect: not idempotent)."""
        MCP_HITS.append(key)
        return f"recorded {key}"

    app = mcp.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(allowed_hosts=["mcp.test:*"], allowed_origins=[]),
    )
    server, thread, port = _serve(app)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        HTTP_HITS.append(self.path)
        body = b'{"item": "ok"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.postgres]),
        pytest.param("amqp", marks=[pytest.mark.rabbitmq, pytest.mark.redis, pytest.mark.postgres]),
    ]
)
def chaos_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """SQLite database + SQLite broker (the embedded default), or PostgreSQL + Redis or RabbitMQ (production; with
    RabbitMQ the results go to a Redis database, as docs/operations.md asks)."""
    results_url = ""
    if request.param == "sqlite":
        path = tmp_path / "switchyard.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        database_url, broker_url = f"sqlite+aiosqlite:///{path}", ""
    else:
        # A broker of its own (another test run's workers would take these tasks; the sweeper would send them
        # again, but slowly): a Redis database, or a RabbitMQ virtual host.
        database_url = request.getfixturevalue("postgres_database")
        broker_url = request.getfixturevalue("redis_database")
        if request.param == "amqp":
            broker_url, results_url = request.getfixturevalue("rabbitmq_vhost"), broker_url
    return {
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_DATABASE_URL": database_url,
        "SWITCHYARD_BROKER_URL": broker_url,
        "SWITCHYARD_RESULT_BACKEND": results_url,
        "SWITCHYARD_TIME_SCALE": "0",
        "SWITCHYARD_AGENT_RUN_LEASE_SECONDS": "2",
        "SWITCHYARD_LOG_LEVEL": "warning",
        "SWITCHYARD_SIMULATE_IN_PROCESS": "1",  # each worker its own simulated fleet: runs are checked, not busy time
    }


async def _progress(database: Any, run_ids: list[str]) -> tuple[int, int]:
    """(sum of run revisions, runs finished) of ``run_ids`` (PostgreSQL's database holds the other brokers' runs
    too): grows as workers checkpoint."""
    from sqlalchemy import func, select
    from sqlmodel import col

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run

    ours = col(Run.id).in_(run_ids)
    async with database.unit_of_work(UNSCOPED) as session:
        revisions = (await session.execute(select(func.coalesce(func.sum(Run.revision), 0)).where(ours))).scalar_one()
        finished = (
            await session.execute(
                select(func.count()).where(
                    ours, col(Run.status).in_(("completed", "failed", "cancelled", "incomplete", "expired"))
                )
            )
        ).scalar_one()
    return int(revisions), int(finished)


class _Watchdog:
    """Fails when the runs' progress (their checkpoints, how many finished) stands still :data:`STALL_S` seconds."""

    def __init__(self, what: str, seed: int) -> None:
        self.what, self.seed = what, seed
        self.seen: tuple[int, int] | None = None
        self.since = time.monotonic()

    @property
    def deadline(self) -> float:
        return self.since + STALL_S

    def check(self, progress: tuple[int, int], total: int) -> None:
        if progress != self.seen:
            self.seen, self.since = progress, time.monotonic()
        assert time.monotonic() < self.deadline, (
            f"{self.what} stuck: {progress[1]}/{total} finished, no checkpoint for {STALL_S:.0f} s (seed {self.seed})"
        )


async def _next_checkpoint(database: Any, run_ids: list[str], revisions: int, deadline: float) -> None:
    """Wait until a worker checkpoints one of the runs (or the deadline passes; the watchdog then says so)."""
    while (await _progress(database, run_ids))[0] == revisions and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.02)


async def _leases_passed(database: Any, deadline: float) -> None:
    """Wait until no run is leased: a killed worker's leases pass after ``SWITCHYARD_AGENT_RUN_LEASE_SECONDS``."""
    from sqlalchemy import func, select
    from sqlmodel import col

    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run, utc_now

    while True:
        async with database.unit_of_work(UNSCOPED) as session:
            leased = (
                await session.execute(select(func.count()).where(col(Run.lease_expires_at) > utc_now()))
            ).scalar_one()
        if not leased:
            return
        assert time.monotonic() < deadline, "a killed worker's lease never passed"
        await asyncio.sleep(0.1)


async def _chaos_tenant(client: Any) -> dict[str, str]:
    """A tenant of its own with a large budget: its owner's headers."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tenants.service import create_operator_key

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        operator = await create_operator_key(session, actor=CLI_ACTOR, name="chaos")
    created = await client.post(
        "/v1/admin/tenants", json={"name": "chaos"}, headers={"Authorization": f"Bearer {operator}"}
    )
    headers = {"Authorization": f"Bearer {created.json()['owner_key']['value']}"}
    budget = await client.post("/v1/budgets", json={"limit_minor": 10**9}, headers=headers)
    assert budget.status_code in (200, 201), budget.text
    return headers


@pytest.mark.timeout(1200)
async def test_runs_survive_kill_9(
    chaos_env: dict[str, str], mcp_port: int, http_port: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from litestar.testing import AsyncTestClient
    from sqlalchemy import select

    from switchyard.agents import INTERRUPTED_OUTPUT, RunState, StepStatus, StepType
    from switchyard.platform.app import create_app
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import BudgetReservation, Run, RunEventRecord, UsageEvent
    from switchyard.platform.runs.tasks import sweep_runs
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    broker = request.node.callspec.params["chaos_env"]
    run_count, kill_count = SIZES[broker]
    # RabbitMQ gives a killed worker's unacknowledged jobs back at once: no sweeper, so that its redelivery alone
    # must finish every run (the SQLite broker and Redis give them back only after their visibility timeout, 1 h)
    sweeping = broker != "amqp"
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    print(f"chaos seed {seed}")
    MCP_HITS.clear()
    HTTP_HITS.clear()
    settings = Settings(
        data_dir=Path(chaos_env["SWITCHYARD_DATA_DIR"]),
        database_url=chaos_env["SWITCHYARD_DATABASE_URL"],
        broker_url=chaos_env["SWITCHYARD_BROKER_URL"],
        result_backend=chaos_env["SWITCHYARD_RESULT_BACKEND"],
        time_scale=0,
        agent_run_lease_seconds=2,
    )
    celery = create_celery(settings)
    workers = ScriptProcess(__file__, chaos_env, tmp_path)
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        database = client.app.state.database
        headers = await _chaos_tenant(client)
        agent = await client.post(
            "/v1/agents",
            json={
                "name": "chaos",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "instructions": "Use the tool you are asked to use, then answer.",
                "tools": [
                    {"type": "calculator"},
                    {"type": "http_request", "allowed_hosts": ["api.test"], "allowed_ports": [http_port]},
                    {"type": "mcp", "server_label": "svc", "server_url": f"http://mcp.test:{mcp_port}/mcp"},
                ],
            },
            headers=headers,
        )
        assert agent.status_code == 201, agent.text
        prompts = [
            "please use svc__record key=k{i}",
            "please use http_request url=http://api.test:{port}/item/{i}",
            "please use calculator expression={i}*7",
        ]
        run_ids = []
        for i in range(run_count):
            content = prompts[i % 3].format(i=i, port=http_port)
            response = await client.post(
                "/v1/runs",
                json={"agent_id": agent.json()["id"], "thread": {"messages": [{"content": content}]}},
                headers=headers,
            )
            assert response.status_code == 201, response.text
            run_ids.append(response.json()["id"])

        kills = 0
        workers.start()
        watchdog = _Watchdog("runs", seed)
        last_sweep = time.monotonic()
        try:
            while True:
                revisions, finished = await _progress(database, run_ids)
                if finished == run_count:
                    break
                watchdog.check((revisions, finished), run_count)
                if kills < kill_count:
                    # wait until the worker is checkpointing, then kill it at a random moment
                    await _next_checkpoint(database, run_ids, revisions, watchdog.deadline)
                    await asyncio.sleep(rng.uniform(0, 0.3))
                    workers.kill()
                    kills += 1
                    if not sweeping:  # the jobs RabbitMQ gives back must find the killed worker's leases passed
                        await _leases_passed(database, time.monotonic() + STALL_S)
                    workers.start()
                else:
                    await asyncio.sleep(0.2)
                if sweeping and time.monotonic() - last_sweep > 1:
                    last_sweep = time.monotonic()
                    for tenant_id, run_id in await sweep_runs(database, grace_s=3):
                        celery.send_task("runs.execute", args=[tenant_id, run_id])
        finally:
            workers.stop()

        async with database.unit_of_work(UNSCOPED) as session:
            runs = (await session.execute(select(Run).where(Run.id.in_(run_ids)))).scalars().all()  # type: ignore[attr-defined]
            usage = (await session.execute(select(UsageEvent))).scalars().all()
            events = (await session.execute(select(RunEventRecord.run_id, RunEventRecord.sequence_number))).all()
            holds = (await session.execute(select(BudgetReservation))).scalars().all()

    assert kills == kill_count
    assert sorted(r.status for r in runs) == ["completed"] * run_count, f"seed {seed}"
    assert max(r.attempts for r in runs) >= 2, "no run was resumed by another worker: the kills missed"
    usage_by_run: dict[str | None, list[UsageEvent]] = collections.defaultdict(list)
    for event in usage:
        usage_by_run[event.run_id].append(event)
    sequences: dict[str, list[int]] = collections.defaultdict(list)
    for run_id, number in events:
        sequences[run_id].append(number)
    for run in runs:
        state = RunState.model_validate(run.state)
        assert all(s.status is not StepStatus.IN_PROGRESS for s in state.steps)
        model_steps = [s for s in state.steps if s.type is StepType.MODEL_CALL]
        billed = usage_by_run[run.id]
        assert sorted(e.event_id for e in billed) == sorted(s.id for s in model_steps), f"run {run.id}"
        assert sum(e.chip_us for e in billed) == state.chip_us == run.chip_us
        assert sorted(sequences[run.id]) == list(range(1, len(sequences[run.id]) + 1))
    # budget holds: every billed model call settled once, to its actual compute; holds of killed calls stay
    # open until they expire and never count as spend
    settled = [h for h in holds if h.status == "settled"]
    assert len(settled) == len(usage)
    assert sum(h.actual_chip_us or 0 for h in settled) == sum(e.chip_us for e in usage)
    hits = collections.Counter(MCP_HITS)
    assert hits, "the MCP tool never ran"
    assert max(hits.values()) == 1, f"an at-most-once MCP call ran twice: {hits.most_common(3)}"
    mcp_runs = [RunState.model_validate(r.state) for r in runs]
    mcp_steps = [
        s for st in mcp_runs for s in st.steps if s.tool_call is not None and s.tool_call.name == "svc__record"
    ]
    recorded = [s for s in mcp_steps if s.output != INTERRUPTED_OUTPUT]
    # a recorded result is a call that ran (once); an interrupted one ran at most once (the worker may have
    # died after the server acted and before the result was stored)
    assert {s.output for s in recorded} <= {f"recorded {key}" for key in MCP_HITS}
    assert len(recorded) <= len(MCP_HITS) <= len(mcp_steps)
    assert len(HTTP_HITS) >= sum(1 for i in range(run_count) if i % 3 == 1)
    resumed = sum(1 for r in runs if r.attempts >= 2)
    interrupted = sum(1 for s in (s for st in mcp_runs for s in st.steps) if s.output == INTERRUPTED_OUTPUT)
    print(
        f"chaos: {kills} kills, {resumed} runs resumed, {interrupted} MCP calls interrupted, "
        f"{len(usage)} model steps billed once, seed {seed}"
    )


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("chaos_env", ["redis"], indirect=True)
async def test_workflows_survive_kill_9(chaos_env: dict[str, str], tmp_path: Path) -> None:
    """12 runs of a workflow that asks a calculator agent three times in a loop, on PostgreSQL and a Redis broker;
    the worker is killed three times mid-workflow: every workflow finishes on another worker, its loop counted to
    three, each model step billed once."""
    from litestar.testing import AsyncTestClient
    from sqlalchemy import select

    from switchyard.agents import RunState, StepType
    from switchyard.platform.app import create_app
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import Run, UsageEvent
    from switchyard.platform.runs.tasks import sweep_runs
    from switchyard.platform.settings import Settings
    from switchyard.platform.worker import create_celery

    run_count, kill_count = 12, 3
    rng = random.Random(seed := random.randrange(2**32))
    print(f"chaos seed {seed}")
    settings = Settings(
        data_dir=Path(chaos_env["SWITCHYARD_DATA_DIR"]),
        database_url=chaos_env["SWITCHYARD_DATABASE_URL"],
        broker_url=chaos_env["SWITCHYARD_BROKER_URL"],
        time_scale=0,
        agent_run_lease_seconds=2,
    )
    celery = create_celery(settings)
    workers = ScriptProcess(__file__, chaos_env, tmp_path)
    async with AsyncTestClient(app=create_app(settings), base_url="http://switchyard.test") as client:
        database = client.app.state.database
        headers = await _chaos_tenant(client)
        agent = await client.post(
            "/v1/agents",
            json={"name": "adder", "model": "meta-llama/Llama-3.1-8B-Instruct", "tools": [{"type": "calculator"}]},
            headers=headers,
        )
        loop = {
            "name": "thrice",
            "start": "loop",
            "state": {"rounds": {"type": "integer", "default": 0}},
            "nodes": [
                {"type": "while", "id": "loop", "condition": "state.rounds < 3", "body": "ask", "max_iterations": 5,
                 "next": "done"},
                {"type": "agent", "id": "ask", "agent_id": agent.json()["id"],
                 "input": "please use calculator expression={{ state.rounds }}*7", "next": "count"},
                {"type": "set_state", "id": "count", "assignments": {"rounds": "state.rounds + 1"}, "next": "loop"},
                {"type": "end", "id": "done"},
            ],
        }  # fmt: skip
        workflow = await client.post("/v1/workflows", json=loop, headers=headers)
        assert workflow.status_code == 201, workflow.text
        run_ids = []
        for i in range(run_count):
            body = {"workflow_id": workflow.json()["id"], "thread": {"messages": [{"content": f"go {i}"}]}}
            response = await client.post("/v1/runs", json=body, headers=headers)
            assert response.status_code == 201, response.text
            run_ids.append(response.json()["id"])
        kills, watchdog, last_sweep = 0, _Watchdog("workflows", seed), time.monotonic()
        workers.start()
        try:
            while (progress := await _progress(database, run_ids))[1] < run_count:
                watchdog.check(progress, run_count)
                if kills < kill_count:
                    await _next_checkpoint(database, run_ids, progress[0], watchdog.deadline)
                    await asyncio.sleep(rng.uniform(0, 0.3))
                    workers.kill()
                    kills += 1
                    workers.start()
                else:
                    await asyncio.sleep(0.2)
                if time.monotonic() - last_sweep > 1:
                    last_sweep = time.monotonic()
                    for tenant_id, run_id in await sweep_runs(database, grace_s=3):
                        celery.send_task("runs.execute", args=[tenant_id, run_id])
        finally:
            workers.stop()
        async with database.unit_of_work(UNSCOPED) as session:
            runs = (await session.execute(select(Run).where(Run.id.in_(run_ids)))).scalars().all()  # type: ignore[attr-defined]
            usage = (await session.execute(select(UsageEvent).where(UsageEvent.run_id.in_(run_ids)))).scalars().all()  # type: ignore[attr-defined]

    assert sorted(r.status for r in runs) == ["completed"] * run_count, f"seed {seed}"
    assert max(r.attempts for r in runs) >= 2, "no workflow was resumed by another worker: the kills missed"
    billed = sorted(e.event_id for e in usage)
    for run in runs:
        state = RunState.model_validate(run.state)
        assert state.workflow is not None
        assert state.workflow.vars["rounds"] == 3, f"run {run.id}"
        asked = [s for s in state.steps if s.tool_call is not None and s.tool_call.name == "ask"]
        assert len(asked) == 3, f"run {run.id}: a node asked {len(asked)} times"
        model_steps = sorted(s.id for s in state.steps if s.type is StepType.MODEL_CALL)
        assert [e for e in billed if e.startswith(f"{run.id}_")] == model_steps, f"run {run.id}"
    assert len(billed) == len(set(billed))
    print(
        f"workflow chaos: {kills} kills, {sum(r.attempts >= 2 for r in runs)} resumed, {len(billed)} steps billed once"
    )
