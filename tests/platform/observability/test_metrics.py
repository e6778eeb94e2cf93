"""``GET /metrics`` after real requests, parsed with Prometheus's own text parser."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent
from switchyard.platform.observability.tracing import enabled
from tests.platform.agents_api.factories import make_agent, run_inline, wait_for_run

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}


async def scrape(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and sorted labels."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8, **extra}


async def test_scrape_after_requests_has_latency_inference_admission_pool_and_billing_metrics(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    headers = tenant.headers("developer")
    before = await scrape(client)

    for _ in range(2):
        answer = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
        assert answer.status_code == 200, answer.text
    thread = await client.post("/v1/threads", json={}, headers=headers)
    assert thread.status_code == 201, thread.text
    client.app.state.settings.tenant_tokens_per_minute = 10  # admission reads its limits at each call
    refused = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
    assert refused.status_code == 400, refused.text
    code = refused.json()["error"]["code"]
    assert code == "request_exceeds_token_limit"

    after = await scrape(client)
    route = {"method": "POST", "route": "/v1/chat/completions"}
    completed = "switchyard_http_request_duration_seconds_count"
    assert value(after, completed, **route, status="200") - value(before, completed, **route, status="200") == 2
    assert value(after, completed, **route, status="400") - value(before, completed, **route, status="400") == 1
    # the route template, not the path: ids never become labels
    thread_route = {"method": "POST", "route": "/v1/threads", "status": "201"}
    assert value(after, completed, **thread_route) >= 1
    # (a template names the parameter, "{thread_id}"; an id is "thread_" and 26 characters)
    assert not any(re.search(r"thread_[0-9a-z]{26}", dict(labels).get("route", "")) for _, labels in after)

    ttft = "switchyard_inference_time_to_first_token_seconds_count"
    assert value(after, ttft, model=MODEL) - value(before, ttft, model=MODEL) == 2
    tpot = "switchyard_inference_time_per_output_token_seconds_count"
    assert value(after, tpot, model=MODEL) - value(before, tpot, model=MODEL) == 2
    output = "switchyard_inference_tokens_total"
    assert value(after, output, model=MODEL, kind="output") - value(before, output, model=MODEL, kind="output") > 0

    refusals = "switchyard_admission_refusals_total"
    refused_here = {"reason": code, "caller": "request"}
    assert value(after, refusals, **refused_here) - value(before, refusals, **refused_here) == 1

    # the pool's status at scrape time: this process simulates the default fleet itself
    queued = [labels for name, labels in after if name == "switchyard_pool_queued_requests"]
    assert ("model", MODEL) in {label for labels in queued for label in labels}
    busy = {
        dict(labels)["replica"]: v for (name, labels), v in after.items() if name == "switchyard_replica_busy_ratio"
    }
    kv = {
        dict(labels)["replica"]: v
        for (name, labels), v in after.items()
        if name == "switchyard_replica_kv_cache_used_ratio"
    }
    assert busy
    assert set(busy) == set(kv)
    assert any(v > 0 for r, v in busy.items() if r.startswith(MODEL))  # the two answers kept a replica busy
    assert all(0 <= v <= 1 for v in [*busy.values(), *kv.values()])

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        pending = (
            await session.execute(select(func.count()).select_from(UsageEvent).where(UsageEvent.status == "pending"))
        ).scalar_one()
    assert pending >= 2  # no worker rates them here
    assert value(after, "switchyard_usage_events_unrated") == pending


async def test_runs_are_counted_by_outcome_and_tool_calls_by_result(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    run_inline(client)
    headers = tenant.headers("developer")
    before = await scrape(client)
    agent = await make_agent(client, tenant, tools=[{"type": "calculator"}])
    created = await client.post(
        "/v1/runs",
        json={"agent_id": agent["id"], "thread": {"messages": [{"content": "use the calculator please"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run

    runs = "switchyard_runs_total"
    for _ in range(500):  # the run is visible as completed a moment before its execution returns
        after = await scrape(client)
        if value(after, runs, outcome="completed") > value(before, runs, outcome="completed"):
            break
        await asyncio.sleep(0.01)
    assert value(after, runs, outcome="completed") - value(before, runs, outcome="completed") == 1
    tools = "switchyard_tool_calls_total"
    calls = sum(
        value(after, tools, kind="builtin", result=r) - value(before, tools, kind="builtin", result=r)
        for r in ("ok", "error")
    )
    assert calls == 1  # the sim model's arguments may or may not suit the calculator: either is one call
    ttft = "switchyard_inference_time_to_first_token_seconds_count"
    assert value(after, ttft, model=MODEL) - value(before, ttft, model=MODEL) == 2  # the run's two model calls


async def test_without_an_endpoint_nothing_is_traced(make_tenant: Any, client: Any) -> None:
    # the conftest's client: its settings name no collector
    assert not enabled()
    answer = await client.get("/healthz")
    assert answer.status_code == 200
    assert "x-trace-id" not in answer.headers


async def test_every_metric_the_operations_guide_names_is_served(client: Any) -> None:
    guide = GUIDE.read_text()
    section = guide[guide.index("## Metrics, traces and logs") :]
    section = section[: section.index("\n## ", 1)]
    named = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in re.findall(r"\bswitchyard_[a-z_]+", section)}
    assert len(named) >= 15
    response = await client.get("/metrics")
    served = {family.name for family in text_string_to_metric_families(response.text)}
    assert named <= served, sorted(named - served)
