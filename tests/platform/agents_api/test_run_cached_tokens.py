"""Cached input tokens on a run: an agent with long instructions run twice reads them from the replica's prefix cache
the second time, and the run's ``usage.prompt_tokens_details.cached_tokens`` and each model step's
``usage.input_tokens_details.cached_tokens`` say how many, as the usage events bill them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from switchyard.platform.db import TenantScope
from switchyard.platform.models import UsageEvent
from tests.platform.agents_api.factories import make_agent, wait_for_run

FINAL = {"completed", "failed", "cancelled", "incomplete", "expired"}
INSTRUCTIONS = "You answer for the harbour office: berths, tides, fuel and the chandlery's opening hours. " * 60


async def _run(client: Any, tenant: Any, agent_id: str) -> dict[str, Any]:
    headers = tenant.headers("developer")
    created = await client.post(
        "/v1/runs",
        json={"agent_id": agent_id, "thread": {"messages": [{"content": "Is there a berth tonight?"}]}},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    run = await wait_for_run(client, created.json()["thread_id"], created.json()["id"], headers, statuses=FINAL)
    assert run["status"] == "completed", run
    return dict(run)


async def _model_steps(client: Any, tenant: Any, run: dict[str, Any]) -> list[dict[str, Any]]:
    path = f"/v1/threads/{run['thread_id']}/runs/{run['id']}/steps?order=asc"
    answer = await client.get(path, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    return [step for step in answer.json()["data"] if step["type"] == "model_call"]


async def test_a_run_repeating_long_instructions_reports_the_cached_prompt_tokens(
    client: Any, tenant: Any, inline_runs: Any
) -> None:
    agent = await make_agent(client, tenant, instructions=INSTRUCTIONS, model_params={"max_tokens": 16})

    first = await _run(client, tenant, agent["id"])
    second = await _run(client, tenant, agent["id"])

    assert first["usage"]["prompt_tokens"] > 1000
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert first["usage"]["prompt_tokens"] * 0.9 < cached < second["usage"]["prompt_tokens"]

    (step,) = await _model_steps(client, tenant, second)
    usage = step["step_details"]["usage"]
    assert usage["input_tokens_details"] == {"cached_tokens": cached}
    assert usage["input_tokens"] == second["usage"]["prompt_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    (first_step,) = await _model_steps(client, tenant, first)
    assert first_step["step_details"]["usage"]["input_tokens_details"] == {"cached_tokens": 0}

    async with client.app.state.database.unit_of_work(TenantScope(tenant.id)) as session:
        billed = (await session.execute(select(UsageEvent).where(UsageEvent.run_id == second["id"]))).scalars().all()
    assert [event.cached_tokens for event in billed] == [cached]
    assert billed[0].cache_saved_chip_us > 0  # the agents' model step carried the fleet's estimate to the ledger


async def test_a_workflow_run_counts_the_cached_prompt_tokens_of_its_agent_nodes(
    client: Any, tenant: Any, inline_runs: Any
) -> None:
    agent = await make_agent(client, tenant, instructions=INSTRUCTIONS, model_params={"max_tokens": 16})
    flow = {
        "name": "harbour",
        "start": "ask",
        "nodes": [
            {"type": "agent", "id": "ask", "agent_id": agent["id"], "next": "done"},
            {"type": "end", "id": "done"},
        ],
    }
    created = await client.post("/v1/workflows", json=flow, headers=tenant.headers("developer"))
    assert created.status_code == 201, created.text

    first = await _run(client, tenant, created.json()["id"])
    second = await _run(client, tenant, created.json()["id"])

    assert first["usage"]["prompt_tokens"] > 1000
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert first["usage"]["prompt_tokens"] * 0.9 < cached < second["usage"]["prompt_tokens"]
