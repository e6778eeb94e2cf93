"""Cancelling a run during its model call stops the call at the fleet: the run ends ``cancelled``, billed for the
tokens generated (the call ran to its end and was billed in full, and the run completed despite the cancel)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from switchyard.platform.app import create_app
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import make_agent, run_inline

MAX_TOKENS = 4000


@pytest.fixture
async def paced(settings: Any) -> AsyncIterator[Any]:
    """The app on a simulated fleet that takes real time per token, executing runs in-process."""
    app = create_app(settings.model_copy(update={"time_scale": 1.0}))
    async with AsyncTestClient(app=app, base_url="http://switchyard.test") as paced_client:
        run_inline(paced_client)
        yield paced_client


async def _settled(paced: Any) -> None:
    """Until the in-process executions have ended (they run on the app's own event loop, not the test's)."""
    deadline = time.monotonic() + 60
    while paced.app.state.jobs.tasks:
        assert time.monotonic() < deadline, "an execution never ended"
        await asyncio.sleep(0.05)


async def test_cancelling_a_run_during_its_model_call_stops_the_call_and_bills_what_it_generated(
    paced: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    agent = await make_agent(paced, tenant, model_params={"max_tokens": MAX_TOKENS})
    body = {"agent_id": agent["id"], "thread": {"messages": [{"role": "user", "content": "Write a long essay."}]}}
    run = (await paced.post("/v1/runs", json=body, headers=headers)).json()
    path = f"/v1/threads/{run['thread_id']}/runs/{run['id']}"
    deadline = time.monotonic() + 120
    while (await paced.get(path, headers=headers)).json()["status"] != "in_progress":
        assert time.monotonic() < deadline, "the run never started"
        await asyncio.sleep(0.05)
    assert (await paced.post(f"{path}/cancel", headers=headers)).status_code == 200
    while (found := (await paced.get(path, headers=headers)).json())["status"] in ("in_progress", "cancelling"):
        assert time.monotonic() < deadline, "the run never stopped"
        await asyncio.sleep(0.05)
    assert found["status"] == "cancelled"
    await _settled(paced)
    async with paced.app.state.database.unit_of_work(UNSCOPED) as session:
        [usage] = (await session.execute(select(UsageEvent))).scalars().all()
    assert 0 < usage.completion_tokens < MAX_TOKENS  # billed once, for what the fleet generated
    assert usage.chip_us == found["chip_us"]
