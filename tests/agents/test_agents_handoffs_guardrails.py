"""Handoffs between agents and guardrails on a run's input and answer, in the pure run loop."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import ValidationError

from switchyard.agents import (
    AgentSpec,
    FunctionModel,
    Message,
    ModelRequest,
    RunLoop,
    RunState,
    RunStatus,
    StepType,
    ToolCall,
    ToolKind,
    ToolRegistry,
    drive_run,
)
from switchyard.agents.guardrails import REGEX_TIMEOUT_S, first_trip
from switchyard.agents.team import HandoffTool, Member, handoff_tool_name
from switchyard.agents.tools import CalculatorTool

BILLING, REFUNDS = "agent_billing1", "agent_refunds1"


def _member(agent_id: str, spec: AgentSpec, tools: ToolRegistry | None = None) -> Member:
    return Member(agent_id=agent_id, version=1, spec=spec, tools=tools or ToolRegistry(), context_window_tokens=8192)


def _team(max_handoffs: int = 10) -> tuple[AgentSpec, ToolRegistry, dict[str, Member]]:
    """A triage agent that may transfer to billing or refunds; refunds may transfer back to triage's peer billing."""
    billing = AgentSpec(name="Billing Agent", model="m-billing", instructions="You answer billing questions.")
    refunds = AgentSpec(
        name="refunds",
        model="m-refunds",
        instructions="You handle refunds.",
        handoffs=[{"agent_id": BILLING}],
        tools=[{"type": "calculator"}],
    )
    triage = AgentSpec(
        name="triage",
        model="m-triage",
        instructions="Route the user.",
        handoffs=[{"agent_id": BILLING, "description": "invoices"}, {"agent_id": REFUNDS}],
        limits={"max_handoffs": max_handoffs},
    )
    refund_tools = ToolRegistry([CalculatorTool(), HandoffTool.to(refunds.handoffs[0], billing.name)])
    members = {BILLING: _member(BILLING, billing), REFUNDS: _member(REFUNDS, refunds, refund_tools)}
    triage_tools = ToolRegistry([HandoffTool.to(h, members[h.agent_id].spec.name) for h in triage.handoffs])
    return triage, triage_tools, members


def _calling(*names: str) -> Message:
    return Message.assistant(None, [ToolCall(id=f"call_{n}", name=n, arguments="{}") for n in names])


async def test_a_handoff_goes_on_as_the_target_agent_on_the_same_messages() -> None:
    triage, tools, members = _team()
    asked: list[ModelRequest] = []
    answers = [_calling("transfer_to_billing_agent"), Message.assistant("Your invoice is paid.")]

    def model(request: ModelRequest) -> Message:
        asked.append(request)
        return answers.pop(0)

    loop = RunLoop(triage, tools, context_window_tokens=8192, members=members)
    state, _ = await drive_run(
        loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("my invoice")], model=FunctionModel(model)
    )
    assert state.status is RunStatus.COMPLETED
    assert state.active_agent == BILLING
    assert [r.model for r in asked] == ["m-triage", "m-billing"]
    assert [t["function"]["name"] for t in asked[0].tools] == ["transfer_to_billing_agent", "transfer_to_refunds"]
    assert "invoices" in asked[0].tools[0]["function"]["description"]
    assert asked[1].messages[0].content == "You answer billing questions."  # the target's instructions
    assert asked[1].tools == ()  # and its tools (it has none)
    handoff = next(s for s in state.steps if s.type is StepType.TOOL_CALL)
    assert handoff.tool_kind is ToolKind.HANDOFF
    assert handoff.output == '{"assistant": "Billing Agent"}'
    assert [s.agent for s in state.steps] == [None, None, BILLING]  # who acted, step by step
    assert [m.role for m in asked[1].messages[1:]] == ["user", "assistant", "tool"]  # the same conversation


async def test_the_target_uses_its_own_tools_and_may_hand_off_again() -> None:
    triage, tools, members = _team()
    answers = [
        _calling("transfer_to_refunds"),
        Message.assistant(None, [ToolCall(id="c1", name="calculator", arguments='{"expression": "6*7"}')]),
        _calling("transfer_to_billing_agent"),
        Message.assistant("done"),
    ]
    loop = RunLoop(triage, tools, context_window_tokens=8192, members=members)
    state, _ = await drive_run(
        loop,
        loop.new_run("run_1", now_ms=0),
        thread=[Message.user("refund")],
        model=FunctionModel(lambda r: answers.pop(0)),
    )
    assert state.status is RunStatus.COMPLETED
    assert state.active_agent == BILLING
    calculator = next(s for s in state.steps if s.tool_call is not None and s.tool_call.name == "calculator")
    assert calculator.output == '{"result": 42}'
    assert calculator.agent == REFUNDS


async def test_handoffs_are_bounded_and_one_per_turn() -> None:
    triage, tools, members = _team(max_handoffs=0)
    answers = [_calling("transfer_to_billing_agent", "transfer_to_refunds"), Message.assistant("I stay")]
    loop = RunLoop(triage, tools, context_window_tokens=8192, members=members)
    state, _ = await drive_run(
        loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("x")], model=FunctionModel(lambda r: answers.pop(0))
    )
    assert state.status is RunStatus.COMPLETED
    assert state.active_agent is None
    outputs = {s.tool_call.name: s.output for s in state.steps if s.tool_call is not None}
    assert outputs["transfer_to_billing_agent"] == "no more handoffs: this run made 0, its limit"
    assert outputs["transfer_to_refunds"] == "Only one handoff is made per turn; this one was not."


def test_handoff_names_follow_the_agents_sdk() -> None:
    assert handoff_tool_name("Billing Agent") == "transfer_to_billing_agent"
    assert handoff_tool_name("Ré-funds!") == "transfer_to_rfunds"


async def test_an_input_guardrail_trips_before_any_model_call() -> None:
    spec = AgentSpec(
        name="a",
        model="m",
        guardrails={"input": [{"type": "regex", "name": "no-ssn", "pattern": r"\d{3}-\d{2}-\d{4}"}]},
    )
    model = FunctionModel(lambda r: "never")
    loop = RunLoop(spec, ToolRegistry(), context_window_tokens=8192)
    state, _ = await drive_run(
        loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("my ssn is 123-45-6789")], model=model
    )
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert state.last_error.code == "guardrail_tripped"
    assert state.last_error.message == "input guardrail 'no-ssn' (regex) tripped: the text matches the pattern"
    assert model.requests == []
    assert state.steps == []
    assert state.chip_us == 0


async def test_an_output_guardrail_replaces_the_answer_of_the_agent_that_gave_it() -> None:
    spec = AgentSpec(name="a", model="m", guardrails={"output": [{"type": "max_length", "max_chars": 5}]})
    loop = RunLoop(spec, ToolRegistry(), context_window_tokens=8192)
    state, _ = await drive_run(
        loop,
        loop.new_run("run_1", now_ms=0),
        thread=[Message.user("hi")],
        model=FunctionModel(lambda r: "a long answer", chip_us_per_token=10),
    )
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert state.last_error.message.startswith("output guardrail 'max_length' (max_length) tripped: the text is 13")
    assert state.messages[-1].content == "The answer was withheld: it tripped an output guardrail."
    assert state.chip_us > 0  # the model's compute was spent and is billed


def test_json_schema_guardrails_check_json_against_the_schema() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "model": "m",
            "guardrails": {"output": [{"type": "json_schema", "schema": {"type": "object", "required": ["ok"]}}]},
        }
    )
    checks = spec.guardrails.output
    assert first_trip(checks, '{"ok": 1}') is None
    trip = first_trip(checks, '{"no": 1}')
    assert trip is not None
    assert "'ok' is a required property" in trip.reason
    trip = first_trip(checks, "not json")
    assert trip is not None
    assert trip.reason.startswith("the text is not JSON")


def test_a_pattern_that_backtracks_for_ever_trips_within_its_time_limit() -> None:
    spec = AgentSpec(name="a", model="m", guardrails={"input": [{"type": "regex", "pattern": "(a|aa)+$"}]})
    started = time.perf_counter()
    trip = first_trip(spec.guardrails.input, "a" * 5000 + "b")
    assert trip is not None
    assert "took longer than" in trip.reason
    schema = {"type": "string", "pattern": "(a|aa)+$"}  # a JSON Schema's own patterns are held to the same limit
    checks = AgentSpec(name="a", model="m", guardrails={"input": [{"type": "json_schema", "schema": schema}]})
    trip = first_trip(checks.guardrails.input, '"' + "a" * 5000 + 'b"')
    assert trip is not None
    assert "took longer than" in trip.reason
    assert time.perf_counter() - started < 100 * REGEX_TIMEOUT_S  # bounded, not minutes


@pytest.mark.parametrize(
    ("guardrails", "error"),
    [
        ({"input": [{"type": "regex", "pattern": "("}]}, "not a valid regular expression"),
        ({"output": [{"type": "json_schema", "schema": {"type": 7}}]}, "not a valid JSON Schema"),
        ({"input": [{"type": "max_length", "max_chars": 0}]}, "greater than 0"),
        ({"input": [{"type": "eval", "code": "1"}]}, "does not match any of the expected tags"),
    ],
)
def test_bad_guardrails_are_refused_with_the_reason(guardrails: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        AgentSpec(name="a", model="m", guardrails=guardrails)


def test_handoffs_name_each_agent_once_and_only_agent_ids() -> None:
    with pytest.raises(ValidationError, match="more than once"):
        AgentSpec(name="a", model="m", handoffs=[{"agent_id": BILLING}, {"agent_id": BILLING}])
    with pytest.raises(ValidationError, match="should match pattern"):
        AgentSpec(name="a", model="m", handoffs=[{"agent_id": "../etc"}])


RESEARCHER = "agent_research1"


def _caller(tool: dict[str, object] | None = None) -> tuple[AgentSpec, ToolRegistry, dict[str, Member]]:
    """A writer that may call a researcher agent as a tool; the researcher has the calculator."""
    from switchyard.agents import AgentToolSpec
    from switchyard.agents.team import AgentTool

    researcher = AgentSpec(
        name="Researcher",
        model="m-research",
        instructions="You find facts.",
        tools=[{"type": "calculator"}],
        guardrails={"input": [{"type": "max_length", "max_chars": 40}]},
    )
    spec = AgentSpec(name="writer", model="m-writer", tools=[tool or {"type": "agent", "agent_id": RESEARCHER}])
    assert isinstance(spec.tools[0], AgentToolSpec)
    tools = ToolRegistry([AgentTool.of(spec.tools[0], researcher.name)])
    members = {RESEARCHER: _member(RESEARCHER, researcher, ToolRegistry([CalculatorTool()]))}
    return spec, tools, members


async def test_an_agent_called_as_a_tool_runs_on_its_own_context_and_answers_the_call() -> None:
    spec, tools, members = _caller()
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        asked.append(request)
        if request.model == "m-research" and request.messages[-1].role == "user":
            return Message.assistant(None, [ToolCall(id="c2", name="calculator", arguments='{"expression": "6*7"}')])
        if request.model == "m-research":
            return Message.assistant("It is 42.")
        if request.messages[-1].role == "tool":
            return Message.assistant(f"The researcher says: {request.messages[-1].content}")
        return Message.assistant(None, [ToolCall(id="c1", name="researcher", arguments='{"input": "what is 6*7?"}')])

    loop = RunLoop(spec, tools, context_window_tokens=8192, members=members)
    state, _ = await drive_run(
        loop,
        loop.new_run("run_1", now_ms=0),
        thread=[Message.user("a secret the researcher must not see")],
        model=FunctionModel(model, chip_us_per_token=1),
    )
    assert state.status is RunStatus.COMPLETED
    assert state.final_message is not None
    assert state.final_message.content == "The researcher says: It is 42."
    assert [r.model for r in asked] == ["m-writer", "m-research", "m-research", "m-writer"]
    first_of_researcher = asked[1]
    assert [m.content for m in first_of_researcher.messages] == ["You find facts.", "what is 6*7?"]  # its own context
    assert [(s.agent, s.depth) for s in state.steps if s.type is StepType.MODEL_CALL] == [
        (None, 0),
        (RESEARCHER, 1),
        (RESEARCHER, 1),
        (None, 0),
    ]
    call = state.steps[1]
    assert call.tool_kind is ToolKind.AGENT
    assert call.output == "It is 42."
    assert state.frames == []
    assert [m.role for m in state.messages] == ["assistant", "tool", "assistant"]  # the frame's stay out of the run's


async def test_an_agent_tool_is_refused_past_its_agents_input_guardrails_and_depth() -> None:
    spec, tools, members = _caller()
    answers = [
        Message.assistant(None, [ToolCall(id="c1", name="researcher", arguments='{"input": "' + "x" * 50 + '"}')]),
        Message.assistant("I could not ask."),
    ]
    loop = RunLoop(spec, tools, context_window_tokens=8192, members=members)
    state, _ = await drive_run(
        loop,
        loop.new_run("run_1", now_ms=0),
        thread=[Message.user("go")],
        model=FunctionModel(lambda r: answers.pop(0)),
    )
    assert state.status is RunStatus.COMPLETED
    refused = state.steps[1]
    assert refused.is_error
    assert refused.output is not None
    assert refused.output.startswith("input guardrail 'max_length' (max_length) tripped")


async def test_a_run_killed_inside_an_agent_tool_resumes_there_billing_each_step_once() -> None:
    spec, tools, members = _caller()
    answers = {
        "m-writer": [
            Message.assistant(None, [ToolCall(id="c1", name="researcher", arguments='{"input": "6*7?"}')]),
            Message.assistant("done"),
        ],
        "m-research": [Message.assistant("42")],
    }
    calls: list[str] = []

    def model(request: ModelRequest) -> Message:
        calls.append(request.model)
        return answers[request.model].pop(0)

    loop = RunLoop(spec, tools, context_window_tokens=8192, members=members)
    state = loop.new_run("run_1", now_ms=0)
    # the worker dies right after the frame opened and its first model step was stored, before the call

    function_model = FunctionModel(model, chip_us_per_token=1)
    state, action = loop.advance(state, thread=[Message.user("go")], now_ms=1)
    response = await function_model.request(action.request)  # type: ignore[union-attr]
    state = loop.record_model_response(state, action.step_id, response, now_ms=2)  # type: ignore[union-attr]
    state, action = loop.advance(state, thread=[Message.user("go")], now_ms=3)
    assert len(state.frames) == 1
    resumed = RunState.model_validate(state.model_dump(mode="json"))
    final, _ = await drive_run(loop, resumed, thread=[Message.user("go")], model=function_model, clock_ms=lambda: 4)
    assert final.status is RunStatus.COMPLETED
    assert calls == ["m-writer", "m-research", "m-writer"]  # the researcher's step was asked once more, not twice
    billed = [s.id for s in final.steps if s.usage is not None]
    assert len(billed) == len(set(billed)) == 3


JUDGE = "agent_judge1"


def _judged(where: str) -> tuple[RunLoop, FunctionModel, list[ModelRequest]]:
    """An agent whose ``where`` is judged by another agent; the judge allows unless the text says ``forbidden``."""
    judge = AgentSpec(name="judge", model="m-judge", instructions="Rule on the text.")
    spec = AgentSpec(name="a", model="m", guardrails={where: [{"type": "agent", "agent_id": JUDGE, "name": "policy"}]})
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        asked.append(request)
        if request.model == "m-judge":
            forbidden = "forbidden" in (request.messages[-1].content or "")
            return Message.assistant(json.dumps({"allowed": not forbidden, "reason": "it says forbidden"}))
        return Message.assistant("a forbidden answer" if "tempt" in (request.messages[-1].content or "") else "fine")

    loop = RunLoop(spec, ToolRegistry(), context_window_tokens=8192, members={JUDGE: _member(JUDGE, judge)})
    return loop, FunctionModel(model, chip_us_per_token=1), asked


async def _drive(loop: RunLoop, model: FunctionModel, text: str) -> RunState:
    state, _ = await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=[Message.user(text)], model=model)
    return state


async def test_an_agent_judges_the_input_before_the_run_answers() -> None:
    loop, model, asked = _judged("input")
    state = await _drive(loop, model, "a forbidden question")
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert state.last_error.message == "input guardrail 'policy' (agent) tripped: the judge ruled: it says forbidden"
    assert [r.model for r in asked] == ["m-judge"]  # only the judge's call: billed to the judge
    assert asked[0].options["response_format"]["json_schema"]["name"] == "guardrail_verdict"
    assert asked[0].tools == ()
    assert [(s.agent, s.depth) for s in state.steps] == [(JUDGE, 1)]
    loop, model, asked = _judged("input")
    state = await _drive(loop, model, "a fair question")
    assert state.status is RunStatus.COMPLETED
    assert [r.model for r in asked] == ["m-judge", "m"]


async def test_an_agent_judges_the_answer_before_it_is_given() -> None:
    loop, model, asked = _judged("output")
    state = await _drive(loop, model, "tempt it")
    assert state.status is RunStatus.FAILED
    assert state.messages[-1].content == "The answer was withheld: it tripped an output guardrail."
    assert [r.model for r in asked] == ["m", "m-judge"]
    assert asked[1].messages[-1].content == "a forbidden answer"  # the judge read the held answer
    loop, model, asked = _judged("output")
    state = await _drive(loop, model, "hello")
    assert state.status is RunStatus.COMPLETED
    assert state.final_message is not None
    assert state.final_message.content == "fine"


def test_a_judge_that_gives_no_verdict_trips_its_guardrail() -> None:
    from switchyard.agents import AgentGuardrail
    from switchyard.agents.guardrails import verdict_trip

    judge = AgentGuardrail(agent_id=JUDGE)
    assert verdict_trip(judge, '{"allowed": true, "reason": ""}') is None
    for answer in ("yes", '{"allowed": "yes"}', "[]"):
        trip = verdict_trip(judge, answer)
        assert trip is not None
        assert trip.reason.startswith("the judge's answer is no verdict")


def _calling_a_judged_agent(where: str) -> tuple[RunLoop, FunctionModel, list[ModelRequest]]:
    """A writer calling a researcher as a tool; the researcher's ``where`` is judged by another agent, which allows
    unless the text says ``forbidden``."""
    judge = AgentSpec(name="judge", model="m-judge", instructions="Rule on the text.")
    guardrails = {where: [{"type": "agent", "agent_id": JUDGE, "name": "policy"}]}
    researcher = AgentSpec(name="Researcher", model="m-research", guardrails=guardrails)
    spec, tools, _ = _caller()
    members = {RESEARCHER: _member(RESEARCHER, researcher), JUDGE: _member(JUDGE, judge)}
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        asked.append(request)
        last = request.messages[-1]
        if request.model == "m-judge":
            forbidden = "forbidden" in (last.content or "")
            return Message.assistant(json.dumps({"allowed": not forbidden, "reason": "it says forbidden"}))
        if request.model == "m-research":
            return Message.assistant("a forbidden fact" if "tempt" in (last.content or "") else "a fact")
        if last.role == "tool":
            return Message.assistant(f"Heard: {last.content}")
        task = (last.content or "").removeprefix("ask ")
        return Message.assistant(None, [ToolCall(id="c1", name="researcher", arguments=json.dumps({"input": task}))])

    loop = RunLoop(spec, tools, context_window_tokens=8192, members=members)
    return loop, FunctionModel(model, chip_us_per_token=1), asked


async def test_an_agent_called_as_a_tool_is_judged_on_its_task_and_its_answer() -> None:
    loop, model, asked = _calling_a_judged_agent("input")
    state = await _drive(loop, model, "ask something forbidden")
    assert state.status is RunStatus.COMPLETED  # the call failed, not the run: the caller was told why
    assert state.steps[1].is_error
    assert state.steps[1].output == "input guardrail 'policy' (agent) tripped: the judge ruled: it says forbidden"
    assert [r.model for r in asked] == ["m-writer", "m-judge", "m-writer"]  # the researcher was never asked
    assert [(s.agent, s.depth) for s in state.steps if s.type is StepType.MODEL_CALL][1] == (JUDGE, 2)
    loop, model, asked = _calling_a_judged_agent("output")
    state = await _drive(loop, model, "ask to tempt it")
    assert state.steps[1].output == "output guardrail 'policy' (agent) tripped: the judge ruled: it says forbidden"
    assert [r.model for r in asked] == ["m-writer", "m-research", "m-judge", "m-writer"]
    assert asked[2].messages[-1].content == "a forbidden fact"  # the judge read the held answer
    loop, model, asked = _calling_a_judged_agent("output")
    state = await _drive(loop, model, "ask politely")
    assert state.final_message is not None
    assert state.final_message.content == "Heard: a fact"
    assert state.frames == []
