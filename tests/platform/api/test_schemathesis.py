"""The OpenAPI document against the running server: schemathesis, every check, every operation, all four phases.

A real server (uvicorn on 127.0.0.1, a fresh SQLite database migrated to head) is tested through its own
``/schema/openapi.json`` twice: with a tenant owner's key over the tenant routes (and the public health routes),
and with an operator key over ``/v1/admin``. Every check runs, response conformance and the stateful phase (which
follows the document's links) included, and a run passes only with zero failures. What the document cannot
announce is listed, with its reason, in ``schemathesis.toml``; ``schemathesis_hooks.py`` gives each request a fresh
``Idempotency-Key``. The seed is fixed so CI is repeatable; ``SWITCHYARD_SCHEMATHESIS_SEED`` picks another.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from switchyard.platform.app import create_app
from switchyard.platform.background.inline import InlineDispatcher
from switchyard.platform.bootstrap import FirstStart, bootstrap
from switchyard.platform.db import Database
from switchyard.platform.execution.environment import RunEnvironment
from switchyard.platform.settings import Settings
from tests.platform.api.live import serve

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
REPO_ROOT = HERE.parents[2]
EXAMPLES_PER_OPERATION = 25
SEED = os.environ.get("SWITCHYARD_SCHEMATHESIS_SEED", "20261203")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True)
class RunningApi:
    url: str
    operator_key: str
    owner_key: str
    thread_id: str
    run_id: str


async def _first_start(database_url: str) -> FirstStart:
    database = Database(database_url)
    try:
        first = await bootstrap(database)
    finally:
        await database.dispose()
    assert first is not None
    return first


@pytest.fixture(scope="module")
def api(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningApi]:
    directory = tmp_path_factory.mktemp("schemathesis")
    shutil.copyfile(sqlite_template, directory / "switchyard.db")
    database_url = f"sqlite+aiosqlite:///{directory / 'switchyard.db'}"
    first = asyncio.run(_first_start(database_url))
    settings = Settings(data_dir=directory / "data", database_url=database_url, time_scale=0)
    app = create_app(settings)
    with serve(app) as url:
        # runs execute in the server's own event loop (the inline dispatcher), not on a Celery worker as under
        # `switchyard up`: no fair turns, shares, leases taken by a worker or put-aside waits here (the worker
        # tests in tests/integration exercise those)
        gateway = app.state.gateway
        environment = RunEnvironment(database=app.state.database, pool=gateway.pool, admission=gateway.admission)
        app.state.jobs = InlineDispatcher(environment)
        owner = {"Authorization": f"Bearer {first.tenant_key}"}
        with httpx.Client(base_url=url, headers=owner, timeout=30) as client:
            agent = client.post("/v1/agents", json={"name": "schemathesis", "model": MODEL})
            assert agent.status_code == 201, agent.text
            body = {"agent_id": agent.json()["id"], "thread": {"messages": [{"content": "Hello"}]}}
            run = client.post("/v1/runs", json=body)
            assert run.status_code == 201, run.text
        yield RunningApi(url, first.operator_key, first.tenant_key, run.json()["thread_id"], run.json()["id"])


def _schemathesis(
    api: RunningApi, key: str, workdir: Path, *selection: str, examples: int = EXAMPLES_PER_OPERATION
) -> str:
    """Run schemathesis over the selected operations with ``key``; the failures, if any, as the assertion message."""
    returncode, output = _run_schemathesis(api, key, workdir, *selection, examples=examples)
    failures = output[output.find("=== FAILURES") :] if "=== FAILURES" in output else output[-20_000:]
    assert returncode == 0, failures[:20_000]
    assert "✅ Stateful" in output, output[-5_000:]  # the phase that follows links ran, and passed
    return output


def _run_schemathesis(
    api: RunningApi,
    key: str,
    workdir: Path,
    *selection: str,
    examples: int = EXAMPLES_PER_OPERATION,
    checks: tuple[str, ...] = ("--exclude-checks", "ensure_resource_availability"),  # the hooks' check replaces it
) -> tuple[int, str]:
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "--no-color",
        "run",
        f"{api.url}/schema/openapi.json",
        "--checks",
        "all",
        *checks,
        "--max-examples",
        str(examples),
        "--seed",
        SEED,
        "--workers",
        "1",
        "--output-truncate",
        "true",
        *selection,
    ]
    env = {
        **os.environ,
        "SWITCHYARD_KEY": key,
        "SCHEMATHESIS_HOOKS": "tests.platform.api.schemathesis_hooks",
        "SCHEMATHESIS_THREAD_ID": api.thread_id,
        "SCHEMATHESIS_RUN_ID": api.run_id,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    # in a directory of its own: schemathesis keeps a cache (.schemathesis/) where it runs
    workdir.mkdir(exist_ok=True)
    result = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.timeout(900)
def test_tenant_routes_conform_to_the_document(api: RunningApi, tmp_path: Path) -> None:
    _schemathesis(api, api.owner_key, tmp_path, "--exclude-path-regex", "^/v1/admin")


@pytest.mark.timeout(900)
def test_operator_routes_conform_to_the_document(api: RunningApi, tmp_path: Path) -> None:
    _schemathesis(api, api.operator_key, tmp_path, "--include-path-regex", "^/v1/admin")


@pytest.mark.timeout(300)
def test_a_404_for_what_the_body_names_is_no_lost_resource(api: RunningApi, tmp_path: Path) -> None:
    """A run posted on a thread just created, for an agent (or version) that does not exist, answers 404 naming the
    body's field. Schemathesis's own check (ST302) takes that for the new thread gone missing (a CI run failed on
    it); the hooks' check tells the two apart. Both see the same requests: only the built-in one fails."""
    threads_and_their_runs = ("--phases", "stateful", "--include-path-regex", r"^/v1/threads(/\{thread_id\}/runs)?$")
    returncode, output = _run_schemathesis(
        api, api.owner_key, tmp_path / "built-in", *threads_and_their_runs, examples=100, checks=()
    )
    assert returncode != 0, output[-5_000:]
    assert "ST302 Created resource not found" in output, output[-5_000:]
    assert '"param":"agent_' in output, output[-5_000:]
    _schemathesis(api, api.owner_key, tmp_path / "hooks", *threads_and_their_runs, examples=100)
