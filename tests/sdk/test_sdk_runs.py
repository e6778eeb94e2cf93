"""Runs through the SDK on a real worker: waiting, streaming, tool outputs, and the asyncio client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from switchyard.sdk import AsyncSwitchyard, Switchyard
from tests.sdk.conftest import MODEL, Installation

pytestmark = pytest.mark.slow

CALCULATOR = [{"type": "calculator"}]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def new_tenant_key(installation: Installation) -> str:
    with Switchyard(api_key=installation.operator_key, base_url=installation.base_url) as operator:
        return operator.admin.tenants.create(name="sdk-runs").owner_key.value


@pytest.fixture
def client(installation: Installation) -> Iterator[Switchyard]:
    with Switchyard(api_key=new_tenant_key(installation), base_url=installation.base_url) as client:
        yield client


def test_create_and_wait_runs_a_tool_and_bills_it(client: Switchyard) -> None:
    agent = client.agents.create(name="maths", model=MODEL, tools=CALCULATOR)
    thread = client.threads.create(messages=[{"content": "use the calculator expression=6*7"}])
    run = client.threads.runs.create_and_wait(thread.id, agent_id=agent.id)
    assert run.status == "completed"
    assert run.is_final
    assert run.chip_us > 0
    assert run.usage.total_tokens > 0
    steps = list(client.threads.runs.steps(thread.id, run.id, order="asc"))
    assert [s.type for s in steps] == ["model_call", "tool_call", "model_call"]
    assert sum(int(s.step_details.get("chip_us", 0)) for s in steps) == run.chip_us
    messages = [(m.role, m.content) for m in client.threads.messages.list(thread.id, order="asc")]
    assert ("tool", '{"result": 42}') in messages
    assert messages[-1][0] == "assistant"


def test_a_stream_delivers_every_event_once_in_order(client: Switchyard) -> None:
    agent = client.agents.create(name="maths", model=MODEL, tools=CALCULATOR)
    thread = client.threads.create(messages=[{"content": "use the calculator expression=2+2"}])
    with client.threads.runs.stream(thread.id, agent_id=agent.id) as stream:
        events = list(stream)
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(1, len(events) + 1))
    assert events[0].event == "thread.run.created"
    assert events[-1].event == "thread.run.completed"
    assert stream.run_id == events[0].data["id"]
    replayed = list(client.threads.runs.events(thread.id, stream.run_id, starting_after=3))
    assert [e.sequence_number for e in replayed] == numbers[3:]


def test_function_tools_wait_for_the_client(client: Switchyard) -> None:
    agent = client.agents.create(name="weather", model=MODEL, tools=[WEATHER])
    run = client.threads.create_and_run(agent_id=agent.id, thread={"messages": [{"content": "get_weather city=Paris"}]})
    run = client.threads.runs.wait(run.thread_id, run.id)
    assert run.status == "requires_action"
    assert not run.is_final
    assert run.required_action is not None
    [call] = run.required_action["submit_tool_outputs"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    client.threads.runs.submit_tool_outputs(
        run.thread_id, run.id, [{"tool_call_id": call["id"], "output": "sunny, 21 C"}]
    )
    done = client.threads.runs.wait(run.thread_id, run.id)
    assert done.status == "completed"
    assert "sunny, 21 C" in (client.threads.messages.list(run.thread_id).data[0].content or "")


def test_the_async_client(installation: Installation) -> None:
    async def scenario() -> None:
        async with AsyncSwitchyard(api_key=new_tenant_key(installation), base_url=installation.base_url) as client:
            agents = [await client.agents.create(name=f"a{i}", model=MODEL, tools=CALCULATOR) for i in range(3)]
            listed = [agent.id async for agent in await client.agents.list(limit=2, order="asc")]
            assert listed == [agent.id for agent in agents]
            thread = await client.threads.create(messages=[{"content": "use the calculator expression=3*3"}])
            names = [event.event async for event in client.threads.runs.stream(thread.id, agent_id=agents[0].id)]
            assert names[0] == "thread.run.created"
            assert names[-1] == "thread.run.completed"
            [run] = (await client.threads.runs.list(thread.id)).data
            assert (await client.threads.runs.wait(thread.id, run.id)).chip_us == run.chip_us > 0

    asyncio.run(scenario())


def test_usage_is_rated_onto_the_draft_invoice_within_seconds(client: Switchyard, installation: Installation) -> None:
    """Agent runs (worker) and chat completions (API) both ask for rating after their usage commits: the draft
    invoice shows it long before the sweeper, which leaves events younger than 30 s alone, could have."""
    agent = client.agents.create(name="maths", model=MODEL, tools=CALCULATOR)
    thread = client.threads.create(messages=[{"content": "use the calculator expression=1+1"}])
    started = int(time.time()) - 60
    run = client.threads.runs.create_and_wait(thread.id, agent_id=agent.id)
    # from a minute before the run: the default window, the month so far, pages 7 daily buckets from its first day
    usage = client.usage.retrieve(start_time=started, bucket_width="1d", group_by=["agent_id"])
    assert [(r.agent_id, r.chip_us) for bucket in usage.data for r in bucket.results] == [(agent.id, run.chip_us)]
    assert agent.id in client.usage.export_csv(group_by=["agent_id"])
    chat = httpx.post(
        f"{installation.base_url}/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
        headers={"Authorization": f"Bearer {client.api_key}"},
    )
    assert chat.status_code == 200, chat.text
    expected = run.chip_us + int(chat.headers["x-switchyard-chip-us"])
    deadline = time.monotonic() + 20
    billed = 0
    while billed != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        billed = sum(line.chip_us for invoice in client.invoices.list() for line in invoice.lines)
    assert billed == expected
    [draft] = client.invoices.list().data
    assert draft.status == "draft"
    assert "chip" in client.invoices.download(draft.id, output="csv").lower()
