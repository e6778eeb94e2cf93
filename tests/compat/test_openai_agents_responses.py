"""openai-agents with its default model, ``OpenAIResponsesModel``, against a real Switchyard server: the client set
with ``set_default_openai_client``, tracing off, an ``Agent`` with a ``@function_tool``, ``Runner.run`` and
``Runner.run_streamed``, ``output_type=`` a pydantic model (``text.format`` json_schema, strict), turns chained on
the server, and a Switchyard agent referenced as the prompt."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import openai
import pytest
from agents.models import _openai_shared
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseTextDeltaEvent
from pydantic import BaseModel

from agents import (
    Agent,
    FileSearchTool,
    MultiProvider,
    RawResponsesStreamEvent,
    RunItemStreamEvent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)

ALIAS = "llama-3.1-8b-instruct"


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


@pytest.fixture
async def default_client(live_server: Any, api_key: str) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK's process-wide client for the test (the one before it is put back after it)."""
    before = _openai_shared.get_default_openai_client()
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as sdk:
        set_default_openai_client(sdk, use_for_tracing=False)
        set_tracing_disabled(True)  # else the SDK exports traces to OpenAI with the client's (Switchyard) key
        try:
            yield sdk
        finally:
            _openai_shared.set_default_openai_client(before)  # type: ignore[arg-type]


def weather_agent(**fields: Any) -> tuple[Agent[Any], list[str]]:
    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        asked.append(city)
        return f"sunny, 21 C in {city}"

    return Agent(name="assistant", instructions="Answer briefly.", model=ALIAS, tools=[get_weather], **fields), asked


@pytest.mark.usefixtures("default_client")
def test_the_default_model_is_the_responses_model() -> None:
    assert isinstance(MultiProvider().get_model(ALIAS), OpenAIResponsesModel)


@pytest.mark.usefixtures("default_client")
async def test_run_calls_the_function_tool_and_answers() -> None:
    agent, asked = weather_agent()
    result = await Runner.run(agent, "Please use get_weather city=Paris")
    assert asked == ["Paris"]
    assert isinstance(result.final_output, str)
    assert result.final_output.startswith("Result of get_weather: sunny, 21 C in Paris")
    assert len(result.raw_responses) == 2
    assert all((r.response_id or "").startswith("resp_") for r in result.raw_responses)  # Responses, not Chat
    assert result.raw_responses[-1].usage.output_tokens > 0
    kinds = [item.type for item in result.new_items]
    assert kinds == ["tool_call_item", "tool_call_output_item", "message_output_item"]


@pytest.mark.usefixtures("default_client")
async def test_run_streamed() -> None:
    agent, asked = weather_agent()
    streamed = Runner.run_streamed(agent, "Please use get_weather city=Oslo")
    raw_types: list[str] = []
    items: list[str] = []
    text = ""
    async for event in streamed.stream_events():
        if isinstance(event, RawResponsesStreamEvent):
            raw_types.append(event.data.type)
            if isinstance(event.data, ResponseTextDeltaEvent):
                text += event.data.delta
        elif isinstance(event, RunItemStreamEvent):
            items.append(event.name)
    assert asked == ["Oslo"]
    assert items == ["tool_called", "tool_output", "message_output_created"]
    assert raw_types.count("response.created") == 2
    assert raw_types.count("response.completed") == 2
    assert "response.function_call_arguments.delta" in raw_types
    assert isinstance(streamed.final_output, str)
    assert text == streamed.final_output
    assert text.startswith("Result of get_weather: sunny, 21 C in Oslo")


@pytest.mark.usefixtures("default_client")
async def test_output_type_gives_a_validated_object() -> None:
    agent = Agent(name="planner", instructions="Plan the meeting.", model=ALIAS, output_type=CalendarEvent)
    result = await Runner.run(agent, "Alice and Bob meet in Oslo on Monday.")
    assert isinstance(result.final_output, CalendarEvent)


@pytest.mark.usefixtures("default_client")
async def test_a_tool_then_an_output_type_streamed() -> None:
    agent, asked = weather_agent(output_type=CalendarEvent)
    streamed = Runner.run_streamed(agent, "Check get_weather city=Oslo, then plan the meeting.")
    async for _ in streamed.stream_events():
        pass
    assert asked == ["Oslo"]
    assert isinstance(streamed.final_output, CalendarEvent)


@pytest.mark.usefixtures("default_client")
async def test_turns_chained_by_previous_response_id() -> None:
    """With ``auto_previous_response_id`` the SDK sends the tool's output alone, pointing at the response that called
    it: the server must supply the rest (the sim quotes the result under the name of the call it answers)."""
    agent, asked = weather_agent()
    result = await Runner.run(agent, "Please use get_weather city=Rome", auto_previous_response_id=True)
    assert asked == ["Rome"]
    assert result.final_output.startswith("Result of get_weather: sunny, 21 C in Rome")
    follow_up = await Runner.run(agent, "Thanks", previous_response_id=result.last_response_id)
    assert isinstance(follow_up.final_output, str)
    assert follow_up.final_output


async def test_a_run_in_a_server_side_conversation(default_client: openai.AsyncOpenAI) -> None:
    conversation = await default_client.conversations.create()
    agent, asked = weather_agent()
    first = await Runner.run(agent, "Please use get_weather city=Lima", conversation_id=conversation.id)
    assert asked == ["Lima"]
    assert first.final_output.startswith("Result of get_weather: sunny, 21 C in Lima")
    await Runner.run(agent, "Thanks", conversation_id=conversation.id)
    items = [item async for item in default_client.conversations.items.list(conversation.id, order="asc")]
    assert [item.type for item in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    assert [getattr(item, "role", None) for item in items if item.type == "message"] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


@pytest.fixture
def adder_agent_id(live_server: Any, api_key: str) -> str:
    """An agent defined in Switchyard: instructions, a model and a server-side tool."""
    created = httpx.post(
        f"{live_server.base_url}/agents",
        json={"name": "adder", "model": ALIAS, "instructions": "You add numbers.", "tools": [{"type": "calculator"}]},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def test_a_switchyard_agent_as_the_prompt(default_client: openai.AsyncOpenAI, adder_agent_id: str) -> None:
    """A Switchyard agent run from openai-agents through OpenAI's reusable-prompt reference: the SDK sends
    ``prompt``, the server supplies the agent's instructions and tools and runs the tool itself."""
    agent = Agent(name="adder", model=ALIAS, prompt={"id": adder_agent_id, "version": "1"})
    result = await Runner.run(agent, "Please use calculator expression=2+3")
    assert result.final_output.startswith('Result of calculator: {"result": 5}')
    (response,) = result.raw_responses
    stored = await default_client.responses.retrieve(response.response_id or "")
    assert stored.instructions == "You add numbers."
    assert [item.type for item in stored.output] == ["mcp_call", "message"]


def _define(live_server: Any, api_key: str, body: dict[str, Any]) -> str:
    created = httpx.post(f"{live_server.base_url}/agents", json=body, headers={"Authorization": f"Bearer {api_key}"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def test_a_switchyard_triage_agent_hands_off_on_the_server(
    default_client: openai.AsyncOpenAI, live_server: Any, api_key: str
) -> None:
    """A triage agent defined in Switchyard hands off on the server to one of two specialists; openai-agents reads
    the transfer (a server-side ``transfer_to_<name>`` call with its output) and the specialist's answer unchanged."""
    billing = _define(live_server, api_key, {"name": "billing", "model": ALIAS, "instructions": "Invoices."})
    refunds = _define(live_server, api_key, {"name": "refunds", "model": ALIAS, "instructions": "Refunds."})
    handoffs = [{"agent_id": billing}, {"agent_id": refunds}]
    triage = _define(live_server, api_key, {"name": "triage", "model": ALIAS, "handoffs": handoffs})
    agent = Agent(name="triage", model=ALIAS, prompt={"id": triage})
    result = await Runner.run(agent, "My refund is late, transfer_to_refunds please")
    assert result.final_output.startswith('Result of transfer_to_refunds: {"assistant": "refunds"}')
    (response,) = result.raw_responses
    transfer, answer = response.output
    assert (transfer.type, transfer.name, transfer.output) == (
        "mcp_call",
        "transfer_to_refunds",
        '{"assistant": "refunds"}',
    )  # type: ignore[union-attr]
    assert answer.type == "message"


async def test_a_switchyard_agent_calls_another_as_a_tool_on_the_server(
    default_client: openai.AsyncOpenAI, live_server: Any, api_key: str
) -> None:
    """A writer agent defined in Switchyard calls a researcher agent as a tool on the server (the researcher runs on
    its own context, billed as itself); openai-agents reads the call and the answer unchanged."""
    researcher = _define(live_server, api_key, {"name": "researcher", "model": ALIAS, "instructions": "Facts."})
    tools = [{"type": "agent", "agent_id": researcher}]
    writer = _define(live_server, api_key, {"name": "writer", "model": ALIAS, "tools": tools})
    result = await Runner.run(Agent(name="writer", model=ALIAS, prompt={"id": writer}), "Ask researcher input=tides")
    (response,) = result.raw_responses
    call, answer = response.output
    assert (call.type, call.name, answer.type) == ("mcp_call", "researcher", "message")  # type: ignore[union-attr]
    assert result.final_output.startswith(f"Result of researcher: {call.output}")  # type: ignore[union-attr]


@pytest.mark.slow  # starts a process
def test_an_exported_workflow_runs_with_openai_agents(live_server: Any, api_key: str, tmp_path: Any) -> None:
    """``GET /v1/workflows/{id}/export?format=agents-sdk`` is a module that runs as written: the graph runs in it,
    each agent node asks the server's agent through openai-agents, and a person's approval is asked on stdin."""
    writer = _define(live_server, api_key, {"name": "writer", "model": ALIAS, "instructions": "You draft."})
    graph = {
        "name": 'reply "desk" \\ """',  # quotes and a backslash: the module's docstring must survive them
        "start": "screen",
        "state": {"rounds": {"type": "integer", "default": 0}, "draft": {"type": "string"},
                  "cost": {"type": "object"}},
        "tools": [{"type": "calculator"}],
        "nodes": [
            {"type": "guardrail", "id": "screen", "guardrails": [{"type": "regex", "pattern": "(?i)password"}],
             "passed": "draft", "tripped": "done"},
            {"type": "while", "id": "draft", "condition": "state.rounds < 2", "body": "write", "max_iterations": 3,
             "next": "price"},
            {"type": "agent", "id": "write", "agent_id": writer, "output_to": "draft", "next": "count"},
            {"type": "set_state", "id": "count", "assignments": {"rounds": "state.rounds + 1"}, "next": "draft"},
            {"type": "function", "id": "price", "tool": "calculator",
             "arguments": {"expression": "{{ state.rounds }} * 15"}, "output_to": "cost", "next": "review"},
            {"type": "user_approval", "id": "review", "message": "Send after {{ state.rounds }} drafts?",
             "approved": "done", "rejected": "done"},
            {"type": "end", "id": "done",
             "output": "{{ state.rounds }} drafts ({{ state.cost.result }} cents): {{ state.draft }}"},
        ],
    }  # fmt: skip
    auth = {"Authorization": f"Bearer {api_key}"}
    created = httpx.post(f"{live_server.base_url}/workflows", json=graph, headers=auth)
    assert created.status_code == 201, created.text
    url = f"{live_server.base_url}/workflows/{created.json()['id']}/export"
    exported = httpx.get(url, params={"format": "agents-sdk"}, headers=auth)
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("text/x-python")
    module = tmp_path / "reply_desk.py"
    module.write_text(exported.text)
    env = {**os.environ, "SWITCHYARD_BASE_URL": live_server.base_url, "OPENAI_API_KEY": api_key}
    done = subprocess.run(
        [sys.executable, str(module), "Where is my parcel?"],
        input="y\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Send after 2 drafts?" in done.stdout  # the approval was asked
    answered = done.stdout.rsplit("Approve? [y/N] ", 1)[1]  # (the prompt is not followed by a newline)
    assert answered.startswith("2 drafts (30 cents): ")  # the workflow's output: two drafts, the calculator's price


async def test_file_search_tool_searches_a_vector_store_here(default_client: openai.AsyncOpenAI) -> None:
    """openai-agents' ``FileSearchTool`` (OpenAI's hosted tool) against a vector store of this server, unchanged."""
    uploaded = await default_client.files.create(
        file=("ferry.txt", b"The Aurora ferry leaves pier 4 at 07:15 every weekday.", "text/plain"),
        purpose="assistants",
    )
    store = await default_client.vector_stores.create(name="harbour")
    attached = await default_client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=uploaded.id)
    assert attached.status == "completed"
    tool = FileSearchTool(vector_store_ids=[store.id], max_num_results=3, include_search_results=True)
    agent = Agent(name="librarian", instructions="Answer from the files.", model=ALIAS, tools=[tool])
    result = await Runner.run(agent, "Use file_search with query=Aurora")
    calls = [item.raw_item for item in result.new_items if item.type == "tool_call_item"]
    assert [call.type for call in calls] == ["file_search_call"]  # type: ignore[union-attr]
    assert calls[0].results[0].file_id == uploaded.id  # type: ignore[union-attr]
    assert str(result.final_output).startswith("Result of file_search: ")  # the model read what the search found
