"""Factories for the agents API tests (also used by the isolation matrix): agents, threads, runs.

Runs execute inline (in the test's event loop) on the app's real accelerator pool, or on a scripted model
when a test needs fixed tool-call ids.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from switchyard.agents import FunctionModel, Message, ModelRequest, ToolCall
from switchyard.platform.background.inline import InlineDispatcher
from switchyard.platform.execution.environment import ModelFactory, RunEnvironment

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def scripted_model(_tenant_id: str, _thread_id: str) -> Any:
    """Calls the first offered tool once (id ``call_1``), then answers with what the tool said."""

    def answer(request: ModelRequest) -> Message:
        last = request.messages[-1]
        if last.role == "tool":
            return Message.assistant(f"The tool said: {last.content}")
        if request.tools:
            name = request.tools[0]["function"]["name"]
            return Message.assistant(None, [ToolCall(id="call_1", name=name, arguments="{}")])
        return Message.assistant("Hello.")

    return FunctionModel(answer, chip_us_per_token=10)


def run_inline(client: Any, *, model_factory: ModelFactory | None = None, **tool_options: Any) -> InlineDispatcher:
    """Execute the app's runs in this process (instead of sending them to Celery)."""
    gateway = client.app.state.gateway
    env = RunEnvironment(
        database=client.app.state.database,
        pool=gateway.pool,
        admission=gateway.admission,
        lease_s=30,
        model_factory=model_factory,
        tool_options=tool_options,
    )
    dispatcher = InlineDispatcher(env)
    client.app.state.jobs = dispatcher
    return dispatcher


async def wait_for_run(client: Any, thread_id: str, run_id: str, headers: dict[str, str], *, statuses: Any) -> Any:
    """Poll the run until its status is one of ``statuses``; returns its JSON."""
    for _ in range(500):
        response = await client.get(f"/v1/threads/{thread_id}/runs/{run_id}", headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        if body["status"] in statuses:
            return body
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} stayed {body['status']}")


async def make_agent(client: Any, tenant: Any, **fields: Any) -> dict[str, Any]:
    body = {"name": "helper", "model": MODEL, "instructions": "Be brief."} | fields
    response = await client.post("/v1/agents", json=body, headers=tenant.headers("developer"))
    assert response.status_code == 201, response.text
    return dict(response.json())


# ---- the isolation matrix: one factory per path parameter (and the run body's agent_id) ----

_threads: dict[str, str] = {}


def _approval_route() -> bool:
    # The matrix calls one factory per path parameter, whatever the route; a run waiting for approvals is
    # what the approvals route needs, a run waiting for tool outputs what every other run route accepts.
    return "/approvals" in os.environ.get("PYTEST_CURRENT_TEST", "")


async def _agent(client: Any, tenant: Any) -> str:
    if not isinstance(getattr(client.app.state, "jobs", None), InlineDispatcher):
        run_inline(client, model_factory=scripted_model)
    tool = {"type": "function", "name": "lookup", "requires_approval": _approval_route()}
    return str((await make_agent(client, tenant, tools=[tool]))["id"])


async def _thread(client: Any, tenant: Any) -> str:
    if tenant.id not in _threads:
        response = await client.post(
            "/v1/threads", json={"messages": [{"content": "look it up"}]}, headers=tenant.headers("developer")
        )
        assert response.status_code == 201, response.text
        _threads[tenant.id] = response.json()["id"]
    return _threads[tenant.id]


async def _run(client: Any, tenant: Any) -> str:
    """A run on the tenant's thread, waiting for the client (tool outputs or approvals for ``call_1``)."""
    thread_id = await _thread(client, tenant)
    agent_id = await _agent(client, tenant)
    headers = tenant.headers("developer")
    response = await client.post(f"/v1/threads/{thread_id}/runs", json={"agent_id": agent_id}, headers=headers)
    assert response.status_code == 201, response.text
    run_id = str(response.json()["id"])
    await wait_for_run(client, thread_id, run_id, headers, statuses={"requires_action"})
    return run_id


async def _workflow_nodes(client: Any, tenant: Any) -> Any:
    """The nodes of a workflow that asks one of the tenant's agents (a workflow body's reference to an agent)."""
    agent_id = (await make_agent(client, tenant))["id"]
    return [
        {"type": "agent", "id": "ask", "agent_id": agent_id, "next": "done"},
        {"type": "end", "id": "done"},
    ]


async def _workflow(client: Any, tenant: Any) -> str:
    body = {"name": "flow", "start": "ask", "nodes": await _workflow_nodes(client, tenant)}
    response = await client.post("/v1/workflows", json=body, headers=tenant.headers("developer"))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


AGENT_FACTORIES = {
    "agent_id": _agent,
    "thread_id": _thread,
    "run_id": _run,
    "workflow_id": _workflow,
    "nodes": _workflow_nodes,
}
