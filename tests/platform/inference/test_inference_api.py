"""/v1/chat/completions through the app: admission refusals change nothing, and every request is metered once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import FleetBusy, UsageEvent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _chat(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 8, **extra}


async def _usage_events(client: Any) -> list[UsageEvent]:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_each_completion_is_metered_once_and_receipts_sum_to_fleet_busy_time(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    responses = await asyncio.gather(
        *(
            client.post("/v1/chat/completions", json=_chat(f"q{n}"), headers=tenant.headers("developer"))
            for n in range(12)
        )
    )
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    receipts = {r.json()["id"]: r.json()["usage"]["compute"]["chip_us"] for r in responses}
    await client.app.state.gateway.drain()
    events = await _usage_events(client)
    assert {e.event_id: e.chip_us for e in events} == receipts
    assert all(e.tenant_id == tenant.id and e.completion_tokens == 8 for e in events)

    await client.app.state.busy_recorder.flush()
    assert await _fleet_busy(client) == sum(receipts.values())
    assert await client.app.state.busy_recorder.flush() == 0  # nothing new: nothing recorded twice


async def _fleet_busy(client: Any) -> int:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return int((await session.execute(select(func.sum(FleetBusy.chip_us)))).scalar_one() or 0)


async def test_a_reused_client_request_id_never_merges_two_answers_into_one_usage_event(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers("developer"), "x-request-id": "my-client-id"}
    answers = [await client.post("/v1/chat/completions", json=_chat(f"q{n}"), headers=headers) for n in range(2)]
    assert [a.headers["x-request-id"] for a in answers] == ["my-client-id"] * 2  # echoed for tracing
    ids = {a.json()["id"] for a in answers}
    assert len(ids) == 2
    await client.app.state.gateway.drain()
    assert {e.event_id for e in await _usage_events(client)} == ids  # each answer billed, once


async def test_every_flush_of_fleet_busy_time_is_recorded(client: Any, make_tenant: Any) -> None:
    """One request per flush, three flushes: each flush's busy time is stored (the second flush of a replica once
    reused the first one's slice and was dropped)."""
    tenant = await make_tenant()
    chip_us = 0
    for n in range(3):
        response = await client.post("/v1/chat/completions", json=_chat(f"q{n}"), headers=tenant.headers("developer"))
        chip_us += response.json()["usage"]["compute"]["chip_us"]
        await client.app.state.gateway.drain()
        await client.app.state.busy_recorder.flush()
        assert await _fleet_busy(client) == chip_us


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        (_chat(model="no-such-model"), 404, "model", "model_not_found"),
        (_chat(max_tokens=10**6), 400, "max_tokens", "invalid_value"),
        (_chat("word " * 140_000, max_tokens=None), 400, "messages", "context_length_exceeded"),
        (_chat(n=2), 400, "n", "invalid_value"),
        (_chat(temperature=5), 400, "temperature", "invalid_value"),
        (_chat(frobnicate=True), 400, "frobnicate", "invalid_value"),
        ({"model": MODEL, "messages": []}, 400, "messages", "invalid_value"),
        ({"model": MODEL, "messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}, 400, None, None),
        (_chat(tool_choice={"type": "function", "function": {"name": "missing"}}), 400, None, None),
    ],
)
async def test_refused_requests_use_no_compute(
    client: Any, make_tenant: Any, body: dict[str, Any], status: int, param: str | None, code: str | None
) -> None:
    tenant = await make_tenant()
    body = {k: v for k, v in body.items() if v is not None}
    response = await client.post("/v1/chat/completions", json=body, headers=tenant.headers("developer"))
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"]
    if param:
        assert error["param"] == param
    if code:
        assert error["code"] == code
    await client.app.state.gateway.drain()
    assert await _usage_events(client) == []


async def test_viewer_keys_cannot_run_inference_but_can_list_models(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    assert (
        await client.post("/v1/chat/completions", json=_chat(), headers=tenant.headers("viewer"))
    ).status_code == 403
    models = (await client.get("/v1/models", headers=tenant.headers("viewer"))).json()
    assert MODEL in [m["id"] for m in models["data"]]


async def test_hard_budget_refuses_with_402_before_any_work(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    budget = await client.post("/v1/budgets", json={"limit_minor": 1, "currency": "USD"}, headers=tenant.headers())
    assert budget.status_code in (200, 201), budget.text
    response = await client.post("/v1/chat/completions", json=_chat(max_tokens=4000), headers=tenant.headers())
    assert response.status_code == 402, response.text
    error = response.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert budget.json()["id"] in error["message"]
    await client.app.state.gateway.drain()
    assert await _usage_events(client) == []


async def test_stream_dropped_by_the_client_is_still_metered_once(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = _chat(stream=True, max_tokens=50)
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=tenant.headers()) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                first = json.loads(line[5:])
                break
    await client.app.state.gateway.drain()
    events = await _usage_events(client)
    assert [e.event_id for e in events] == [first["id"]]
    assert events[0].completion_tokens == 50


async def test_tenant_concurrency_cap_is_429(settings: Any, make_tenant: Any, client: Any) -> None:
    from switchyard.platform.auth import Principal, Role
    from switchyard.platform.db import TenantScope
    from switchyard.platform.http.errors import RateLimited
    from switchyard.platform.inference.schemas import ChatCompletionCreate

    settings.tenant_max_concurrency = 2
    gateway = client.app.state.gateway
    tenant = await make_tenant()
    caller = Principal(key_id="key_test", scope=TenantScope(tenant.id), role=Role.OWNER)
    body = ChatCompletionCreate.model_validate(_chat())
    held = [await gateway.admit(principal=caller, body=body, request_id=f"chatcmpl-{n}") for n in range(2)]
    with pytest.raises(RateLimited) as refused:
        await gateway.admit(principal=caller, body=body, request_id="chatcmpl-3")
    assert refused.value.code == "concurrency_limit_exceeded"
    over_http = await client.post("/v1/chat/completions", json=_chat(), headers=tenant.headers())
    assert over_http.status_code == 429
    assert over_http.headers["retry-after"] == "1"
    for admitted in held:  # finishing a request gives its slot back
        async for _event in gateway.run(admitted):
            pass
    await gateway.drain()
    assert (await client.post("/v1/chat/completions", json=_chat(), headers=tenant.headers())).status_code == 200


async def test_fleet_view_and_reload(client: Any, operator_headers: dict[str, str], tmp_path: Path) -> None:
    fleet = (await client.get("/v1/admin/fleet", headers=operator_headers)).json()
    names = [d["model"] for d in fleet["deployments"]]
    assert MODEL in names
    assert all(d["replicas"] for d in fleet["deployments"])
    settings = client.app.state.settings
    bad = tmp_path / "bad.json"
    bad.write_text('{"deployments": [{"name": "x", "model": "nope/nope"}]}')
    settings.fleet_file = str(bad)
    refused = await client.post("/v1/admin/fleet/reload", headers=operator_headers)
    assert refused.status_code == 400
    assert "nope/nope" in refused.json()["error"]["message"]
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {"deployments": [{"name": "tiny", "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4}]}
        )
    )
    settings.fleet_file = str(good)
    reloaded = await client.post("/v1/admin/fleet/reload", headers=operator_headers)
    assert reloaded.status_code == 200, reloaded.text
    assert [d["model"] for d in reloaded.json()["deployments"]] == ["tiny"]


async def test_client_disconnect_mid_stream_cancels_and_meters_the_partial_compute_once(
    settings: Any, client: Any, make_tenant: Any
) -> None:
    """A client that drops its connection mid-stream (a real socket to uvicorn on 127.0.0.1) stops the generation
    upstream: a 500-token answer is billed for the few tokens produced, once, and that is the replica's busy time.
    The served app's shutdown drains the gateway and records the busy time, so the ledger is complete after it."""
    import httpx

    from switchyard.platform.app import create_app
    from tests.platform.api.live import serve

    tenant = await make_tenant()
    paced = settings.model_copy(update={"time_scale": 1.0})  # tokens take their simulated time: a middle of the stream
    body = _chat(max_tokens=500, stream=True)
    with serve(create_app(paced)) as base:
        async with (
            httpx.AsyncClient(base_url=base, timeout=60) as http,
            http.stream("POST", "/v1/chat/completions", json=body, headers=tenant.headers("developer")) as sse,
        ):
            assert sse.status_code == 200
            chunks = []
            async for line in sse.aiter_lines():
                if line.startswith("data: "):
                    chunks.append(json.loads(line.removeprefix("data: ")))
                if len(chunks) == 4:  # the role chunk and three tokens, then the client goes away:
                    break  # leaving the stream with its body unread closes the connection
    assert len(chunks) == 4
    (event,) = await _usage_events(client)
    assert event.event_id == chunks[0]["id"]
    assert 3 <= event.completion_tokens < 500  # all 500 would mean the generation outlived its client
    assert event.chip_us > 0
    assert await _fleet_busy(client) == event.chip_us  # the partial compute is the replica's busy time, once
