"""Cancelling a background response stops its model call at the fleet: it ends ``cancelled``, billed for the tokens
it generated (it ran to its end, billed in full, and ended ``incomplete``). Deleting one that runs cancels it the
same way (it ran on, uncancellable). A response chaining on a deleted one is refused, and a chain through a deleted
response ends there (its output fed every later response)."""

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
from tests.platform.agents_api.factories import run_inline

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LONG = {"model": MODEL, "input": "Write a long essay about rivers.", "max_output_tokens": 4000, "background": True}


@pytest.fixture
async def paced(settings: Any) -> AsyncIterator[Any]:
    """The app on a simulated fleet that takes real time per token, executing background responses in-process."""
    app = create_app(settings.model_copy(update={"time_scale": 1.0}))
    async with AsyncTestClient(app=app, base_url="http://switchyard.test") as paced_client:
        run_inline(paced_client)
        yield paced_client


async def _until(client: Any, response_id: str, headers: dict[str, str], statuses: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        found = await client.get(f"/v1/responses/{response_id}", headers=headers)
        body: dict[str, Any] = found.json()
        if found.status_code == 200 and body["status"] in statuses:
            return body
        assert time.monotonic() < deadline, f"response {response_id} stayed {body}"
        await asyncio.sleep(0.05)


async def _usage(client: Any) -> list[UsageEvent]:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def _settled(paced: Any) -> None:
    """Until the in-process executions have ended (they run on the app's own event loop, not the test's)."""
    deadline = time.monotonic() + 60
    while paced.app.state.jobs.tasks:
        assert time.monotonic() < deadline, "an execution never ended"
        await asyncio.sleep(0.05)


async def test_cancelling_a_running_background_response_stops_its_model_call_and_bills_what_it_generated(
    paced: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    created = await paced.post("/v1/responses", json=LONG, headers=headers)
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    await _until(paced, response_id, headers, {"in_progress"})
    cancelled = await paced.post(f"/v1/responses/{response_id}/cancel", headers=headers)
    assert cancelled.status_code == 200, cancelled.text
    done = await _until(paced, response_id, headers, {"completed", "incomplete", "failed", "cancelled"})
    assert done["status"] == "cancelled"
    generated = done["usage"]["output_tokens"]
    assert generated < LONG["max_output_tokens"]
    [usage] = await _usage(paced)
    assert usage.completion_tokens == generated  # billed for what the fleet generated, once
    assert usage.chip_us == done["usage"]["compute"]["chip_us"] > 0
    events = await paced.get(f"/v1/responses/{response_id}?stream=true", headers=headers)
    assert "event: response.cancelled" in events.text
    await _settled(paced)


async def test_deleting_a_running_background_response_cancels_it(paced: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    created = await paced.post("/v1/responses", json=LONG, headers=headers)
    response_id = created.json()["id"]
    await _until(paced, response_id, headers, {"in_progress"})
    deleted = await paced.delete(f"/v1/responses/{response_id}", headers=headers)
    assert deleted.status_code == 200, deleted.text
    assert (await paced.get(f"/v1/responses/{response_id}", headers=headers)).status_code == 404
    deadline = time.monotonic() + 120
    while not (usage := await _usage(paced)):  # the response is hidden: its books show when it stopped
        assert time.monotonic() < deadline, "the deleted response never stopped"
        await asyncio.sleep(0.05)
    assert usage[0].completion_tokens < LONG["max_output_tokens"]
    await _settled(paced)


async def test_a_chain_on_a_deleted_response_is_refused_and_a_chain_through_one_ends_there(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    long_answer = {"model": MODEL, "input": "Write a long essay.", "max_output_tokens": 400}
    first = await client.post("/v1/responses", json=long_answer, headers=headers)
    answered = first.json()["usage"]["output_tokens"]  # the length the sim model drew, at most 400
    assert 100 < answered <= 400
    first_id = first.json()["id"]
    body = {"model": MODEL, "input": "Go on.", "max_output_tokens": 4}
    second = await client.post("/v1/responses", json={**body, "previous_response_id": first_id}, headers=headers)
    second_id = second.json()["id"]
    through = await client.post("/v1/responses", json={**body, "previous_response_id": second_id}, headers=headers)
    assert through.json()["usage"]["input_tokens"] > answered  # the first response's answer is in the chain
    assert (await client.delete(f"/v1/responses/{first_id}", headers=headers)).status_code == 200
    refused = await client.post("/v1/responses", json={**body, "previous_response_id": first_id}, headers=headers)
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["param"] == "previous_response_id"
    after = await client.post("/v1/responses", json={**body, "previous_response_id": second_id}, headers=headers)
    assert after.status_code == 200, after.text
    assert after.json()["usage"]["input_tokens"] < answered  # the chain ends at the deleted response
