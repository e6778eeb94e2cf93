"""Handoffs between agents and guardrails on a run's input and answer, in the pure run loop."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from switchyard.agents import (
    AgentSpec,
    FunctionModel,
    Message,
    ModelRequest,
    RunLoop,
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
