"""Run events derived from consecutive checkpointed states."""

from __future__ import annotations

import itertools
import json

from switchyard.agents import FunctionModel, Message, RunState, ToolCall, drive_run
from switchyard.agents.events import events_between
from switchyard.agents.loop import RunLoop
from switchyard.agents.runner import wall_clock_ms
from switchyard.agents.spec import AgentSpec
from switchyard.agents.tools import CalculatorTool, FunctionTool, ToolRegistry


async def _states() -> tuple[RunLoop, list[RunState]]:
    spec = AgentSpec(name="e", model="m")
    loop = RunLoop(
        spec, ToolRegistry([CalculatorTool(), FunctionTool("ask", {"type": "object"})]), context_window_tokens=4096
    )
    answers = [
        Message.assistant(None, [ToolCall(id="c", name="calculator", arguments=json.dumps({"expression": "2+2"}))]),
        Message.assistant(None, [ToolCall(id="f", name="ask", arguments="{}")]),
        Message.assistant("four"),
    ]
    model = FunctionModel(lambda request: answers.pop(0))
    states = [loop.new_run("r", now_ms=0)]

    async def keep(state: RunState) -> None:
        states.append(state)

    state, _ = await drive_run(loop, states[0], thread=[Message.user("hi")], model=model, checkpoint=keep)
    states.append(loop.submit_tool_outputs(state, {"f": "yes"}, now_ms=wall_clock_ms()))
    await drive_run(loop, states[-1], thread=[Message.user("hi")], model=model, checkpoint=keep)
    return loop, states


async def test_event_sequence_of_a_run() -> None:
    _, states = await _states()
    names: list[str] = []
    previous: RunState | None = None
    for state in states:
        names += [e.event for e in events_between(previous, state)]
        previous = state
    assert names == [
        "thread.run.created",
        "thread.run.queued",
        "thread.run.in_progress",
        "thread.run.step.created",
        "thread.message.created",
        "thread.message.completed",
        "thread.run.step.completed",
        "thread.run.step.created",
        "thread.message.created",
        "thread.message.completed",
        "thread.run.step.completed",
        "thread.run.step.created",
        "thread.message.created",
        "thread.message.completed",
        "thread.run.step.completed",
        "thread.run.step.created",
        "thread.run.requires_action",
        "thread.run.in_progress",
        "thread.message.created",
        "thread.message.completed",
        "thread.run.step.completed",
        "thread.run.step.created",
        "thread.message.created",
        "thread.message.completed",
        "thread.run.step.completed",
        "thread.run.completed",
    ]


async def test_unchanged_state_has_no_events_and_payloads_are_json() -> None:
    _, states = await _states()
    assert events_between(states[-1], states[-1]) == []
    for before, after in itertools.pairwise(states):
        for event in events_between(before, after):
            json.dumps(event.data)
            assert event.data.get("run_id", event.data.get("id")) == "r"
