"""The console's runs list holds every agent run: a thread's runs and the responses made with ``prompt.id``."""

from __future__ import annotations

from typing import Any

from tests.platform.console.factories import sign_in

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def test_runs_made_through_the_responses_api_with_a_prompt_id_are_listed(
    console: Any, make_console_tenant: Any
) -> None:
    tenant, other = await make_console_tenant(), await make_console_tenant()
    made = await console.post(
        "/v1/agents", json={"name": "prompt-bot", "model": MODEL, "instructions": "Be brief."}, headers=tenant.headers()
    )
    agent_id = made.json()["id"]
    body = {"model": MODEL, "prompt": {"id": agent_id}, "input": "Hello", "max_output_tokens": 16}
    stored = await console.post("/v1/responses", json=body, headers=tenant.headers())
    assert stored.status_code == 200, stored.text
    unstored = await console.post("/v1/responses", json={**body, "store": False}, headers=tenant.headers())
    assert unstored.status_code == 200, unstored.text
    plain = await console.post("/v1/responses", json={"model": MODEL, "input": "Hi"}, headers=tenant.headers())
    assert plain.status_code == 200, plain.text

    await sign_in(console, tenant.emails["viewer"])
    listed = await console.get("/console/runs")
    assert stored.json()["id"] in listed.text
    assert "prompt-bot v1" in listed.text
    assert unstored.json()["id"] not in listed.text  # kept for its books only
    assert plain.json()["id"] not in listed.text  # no agent ran it
    status = stored.json()["status"]
    assert stored.json()["id"] in (await console.get(f"/console/runs?agent={agent_id}&status={status}")).text
    assert stored.json()["id"] not in (await console.get("/console/runs?status=expired")).text

    console.cookies.clear()
    await sign_in(console, other.emails["owner"])
    assert stored.json()["id"] not in (await console.get("/console/runs")).text
