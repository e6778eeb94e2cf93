"""An ``Idempotency-Key`` guards a streamed response for as long as it runs: a client that drops the stream after
``response.created`` and retries gets 409 while the response goes on, then the stored stream; never a second
response billed again. Against a real server (uvicorn on 127.0.0.1) and a real disconnect."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from switchyard.platform import idempotency
from switchyard.platform.app import create_app
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import ResponseRecord, UsageEvent
from tests.platform.api.live import serve

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BODY = {"model": MODEL, "input": "Write a long essay about rivers.", "max_output_tokens": 400, "stream": True}


async def _first_event(http: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any] = BODY) -> dict[str, Any]:
    """POST the streamed response, read its first event, and drop the connection."""
    async with http.stream("POST", "/v1/responses", json=body, headers=headers) as streamed:
        assert streamed.status_code == 200
        async for line in streamed.aiter_lines():
            if line.startswith("data: "):
                event: dict[str, Any] = json.loads(line.removeprefix("data: "))
                assert event["type"] == "response.created"
                return event
    raise AssertionError("the stream ended without an event")


async def test_a_dropped_stream_retried_with_its_key_is_409_then_replayed_and_runs_once(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers("developer"), "Idempotency-Key": str(uuid.uuid4())}
    paced = settings.model_copy(update={"time_scale": 1.0})  # the simulated fleet takes real time per token
    with serve(create_app(paced)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            created = await _first_event(http, headers)
            response_id = created["response"]["id"]
            retried = await http.post("/v1/responses", json=BODY, headers=headers)
            assert retried.status_code == 409, retried.text
            assert retried.json()["error"]["code"] == "idempotency_key_in_flight"
            deadline = time.monotonic() + 120
            while retried.status_code == 409:  # until the first request's answer is complete and stored
                assert time.monotonic() < deadline, "the first response never finished"
                await asyncio.sleep(0.2)
                retried = await http.post("/v1/responses", json=BODY, headers=headers)
            assert retried.status_code == 200, retried.text
            assert retried.headers["idempotent-replayed"] == "true"
            assert retried.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[6:]) for line in retried.text.splitlines() if line.startswith("data: ")]
            assert events[0] == created
            assert events[-1]["type"] == "response.completed" or events[-1]["type"] == "response.incomplete"
            assert events[-1]["response"]["id"] == response_id
            assert events[-1]["response"]["usage"]["output_tokens"] > 0
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert [row.id for row in (await session.execute(select(ResponseRecord))).scalars()] == [response_id]
        usage = (await session.execute(select(UsageEvent))).scalars().all()
    assert len(usage) == 1  # one model call, billed once
    assert usage[0].completion_tokens == events[-1]["response"]["usage"]["output_tokens"]


async def test_a_claim_outlives_its_lease_while_its_response_runs(
    client: Any, make_tenant: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim is taken over ``IN_FLIGHT_LEASE`` after its process stopped renewing it, never while its request runs
    (a response may run up to its time limit, a day at most): a retry past the lease is still 409."""
    monkeypatch.setattr(idempotency, "IN_FLIGHT_LEASE", timedelta(seconds=1))
    tenant = await make_tenant()
    headers = {**tenant.headers("developer"), "Idempotency-Key": str(uuid.uuid4())}
    body = {**BODY, "max_output_tokens": 2000}
    # Four wall seconds per simulated one: at trn2's refitted decode (~8 ms a token for this model, 20 ms before) the
    # answer the simulated model draws for this input ends within 2.5 s, before the lease (and this check) is past.
    paced = settings.model_copy(update={"time_scale": 4.0})
    with serve(create_app(paced)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            created = await _first_event(http, headers, body)
            await asyncio.sleep(2.5)  # past the lease
            running = await http.get(f"/v1/responses/{created['response']['id']}", headers=headers)
            assert running.json()["status"] == "in_progress"  # else this test proves nothing
            async with http.stream("POST", "/v1/responses", json=body, headers=headers) as again:
                assert again.status_code == 409  # a 200 would be a second response, streaming
            deadline = time.monotonic() + 120
            retried = await http.post("/v1/responses", json=body, headers=headers)
            while retried.status_code == 409:
                assert time.monotonic() < deadline, "the first response never finished"
                await asyncio.sleep(0.2)
                retried = await http.post("/v1/responses", json=body, headers=headers)
            assert retried.headers["idempotent-replayed"] == "true"
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        assert len((await session.execute(select(ResponseRecord))).scalars().all()) == 1


async def test_a_dropped_chat_completion_stream_with_a_key_is_produced_whole_and_replayed(
    client: Any, make_tenant: Any, settings: Any
) -> None:
    """A streamed chat completion sent with a key is guarded the same way: the client that left gets the whole
    answer on its retry, billed once (without a key, its generation stops when the client leaves)."""
    tenant = await make_tenant()
    headers = {**tenant.headers("developer"), "Idempotency-Key": str(uuid.uuid4())}
    essay = [{"role": "user", "content": "Write a long essay."}]
    body = {"model": MODEL, "messages": essay, "max_tokens": 300, "ignore_eos": True}  # exactly 300 tokens
    body["stream"] = True
    paced = settings.model_copy(update={"time_scale": 1.0})
    with serve(create_app(paced)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as streamed:
                assert streamed.status_code == 200
                async for line in streamed.aiter_lines():
                    if line.startswith("data: "):
                        break  # the first chunk: drop the connection
            deadline = time.monotonic() + 120
            retried = await http.post("/v1/chat/completions", json=body, headers=headers)
            while retried.status_code == 409:
                assert time.monotonic() < deadline, "the first completion never finished"
                await asyncio.sleep(0.2)
                retried = await http.post("/v1/chat/completions", json=body, headers=headers)
            assert retried.headers["idempotent-replayed"] == "true"
            chunks = [line[6:] for line in retried.text.splitlines() if line.startswith("data: ")]
            assert chunks[-1] == "[DONE]"
            text = "".join(
                choice["delta"].get("content") or ""
                for chunk in map(json.loads, chunks[:-1])
                for choice in chunk.get("choices", [])
            )
            assert text
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        [usage] = (await session.execute(select(UsageEvent))).scalars().all()
    assert usage.completion_tokens == 300  # the whole answer, once
