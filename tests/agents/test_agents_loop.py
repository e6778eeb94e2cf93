"""The run loop as a pure state machine: flows, limits, client actions, and resumption after crashes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from switchyard.agents import (
    INTERRUPTED_OUTPUT,
    AgentSpec,
    AwaitClient,
    CallModel,
    ExecuteTools,
    FunctionModel,
    InvalidTransitionError,
    Message,
    ModelCallInterrupted,
    ModelCallRefused,
    ModelRequest,
    ModelResponse,
    RetrySemantics,
    RunFinished,
    RunLoop,
    RunState,
    RunStatus,
    StepStatus,
    StepType,
    ToolCall,
    ToolKind,
    ToolOutputsError,
    ToolRegistry,
    ToolResult,
    Usage,
    drive_run,
)
from switchyard.agents.tools import CalculatorTool, FunctionTool, ToolContext, ToolDefinition

THREAD = [Message.user("What is 6 * 7? Then look it up.")]


class Clock:
    """Milliseconds advancing by a fixed tick on every read."""

    def __init__(self, tick_ms: int = 5) -> None:
        self.now = 1_000
        self.tick_ms = tick_ms

    def __call__(self) -> int:
        self.now += self.tick_ms
        return self.now


class SideEffectTool:
    """A worker-side tool with a visible side effect; ``retry`` chooses its guarantee."""

    kind = ToolKind.BUILTIN
    requires_approval = False

    def __init__(self, name: str = "post", retry: RetrySemantics = RetrySemantics.AT_MOST_ONCE) -> None:
        self.definition = ToolDefinition(name=name, description="", parameters={"type": "object", "properties": {}})
        self.retry = retry
        self.effects: list[str] = []

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return self.retry

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        self.effects.append(context.call_id)
        return ToolResult(f"done {len(self.effects)}")


def scripted(*turns: Message | str, chip_us: int = 100, tokens: int = 10) -> FunctionModel:
    """A model answering with ``turns`` in order, each costing ``chip_us`` and ``tokens`` in and out."""
    answers = list(turns)

    def answer(request: ModelRequest) -> ModelResponse:
        turn = answers.pop(0)
        message = Message.assistant(turn) if isinstance(turn, str) else turn
        return ModelResponse(message=message, usage=Usage(input_tokens=tokens, output_tokens=tokens), chip_us=chip_us)

    return FunctionModel(answer)


def calls(*specs: tuple[str, str, dict[str, Any]]) -> Message:
    return Message.assistant(None, [ToolCall(id=i, name=n, arguments=json.dumps(a)) for i, n, a in specs])


def make_loop(tools: list[Any] | None = None, **limits: Any) -> RunLoop:
    spec = AgentSpec(name="t", model="llama-3.1-8b", instructions="Be exact.", limits=limits)
    return RunLoop(spec, ToolRegistry(tools or []), context_window_tokens=4096)


async def test_final_answer_completes_with_one_model_step() -> None:
    loop = make_loop()
    model = scripted("42")
    state, action = await drive_run(loop, loop.new_run("r1", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert isinstance(action, RunFinished)
    assert state.status is RunStatus.COMPLETED
    assert state.final_message is not None
    assert state.final_message.content == "42"
    (step,) = state.steps
    assert (step.type, step.status, step.chip_us, step.usage) == (
        StepType.MODEL_CALL,
        StepStatus.COMPLETED,
        100,
        Usage(input_tokens=10, output_tokens=10),
    )
    assert step.duration_ms is not None
    assert step.duration_ms > 0
    sent = model.requests[0]
    assert [m.role for m in sent.messages] == ["system", "user"]
    assert sent.messages[0].content == "Be exact."


async def test_builtin_tool_result_goes_back_to_the_model() -> None:
    loop = make_loop([CalculatorTool()])
    model = scripted(calls(("c1", "calculator", {"expression": "6 * 7"})), "It is 42.")
    state, _ = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert state.status is RunStatus.COMPLETED
    assert [s.type for s in state.steps] == [StepType.MODEL_CALL, StepType.TOOL_CALL, StepType.MODEL_CALL]
    assert state.steps[1].output == '{"result": 42}'
    second = model.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "tool"]
    assert second[-1].tool_call_id == "c1"
    assert state.chip_us == 200
    assert state.usage.total_tokens == 40


async def test_function_tool_requires_action_and_outputs_resume_the_run() -> None:
    lookup = FunctionTool("lookup", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    loop = make_loop([lookup, CalculatorTool()])
    model = scripted(
        calls(("a", "lookup", {"q": "x"}), ("b", "calculator", {"expression": "1+1"}), ("c", "lookup", {"q": "y"})),
        "done",
    )
    clock = Clock()
    state, action = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=clock)
    assert isinstance(action, AwaitClient)
    assert state.status is RunStatus.REQUIRES_ACTION
    assert action.required_action.type == "submit_tool_outputs"
    assert [c.id for c in action.required_action.tool_calls] == ["a", "c"]
    assert state.step(state.steps[2].id).output == '{"result": 2}'  # the worker-side call already ran

    with pytest.raises(ToolOutputsError) as unknown:
        loop.submit_tool_outputs(state, {"a": "1", "c": "2", "zzz": "3"}, now_ms=clock())
    assert unknown.value.code == "unknown_tool_call"
    with pytest.raises(ToolOutputsError) as missing:
        loop.submit_tool_outputs(state, {"a": "1"}, now_ms=clock())
    assert missing.value.code == "missing_tool_outputs"

    state = loop.submit_tool_outputs(state, {"a": "A", "c": "C"}, now_ms=clock())
    assert state.status is RunStatus.IN_PROGRESS
    state, action = await drive_run(loop, state, thread=THREAD, model=model, clock_ms=clock)
    assert state.status is RunStatus.COMPLETED
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert sorted((m.tool_call_id, m.content) for m in tool_messages) == [
        ("a", "A"),
        ("b", '{"result": 2}'),
        ("c", "C"),
    ]
    with pytest.raises(ToolOutputsError) as late:
        loop.submit_tool_outputs(state, {"a": "again"}, now_ms=clock())
    assert late.value.code == "no_pending_action"


async def test_requires_action_expires() -> None:
    loop = make_loop([FunctionTool("f", {"type": "object"})], requires_action_ttl_s=1)
    clock = Clock()
    state, _ = await drive_run(
        loop, loop.new_run("r", now_ms=0), thread=THREAD, model=scripted(calls(("a", "f", {}))), clock_ms=clock
    )
    later = clock.now + 2_000
    with pytest.raises(ToolOutputsError) as expired:
        loop.submit_tool_outputs(state, {"a": "x"}, now_ms=later)
    assert expired.value.code == "expired"
    state, action = loop.advance(state, thread=THREAD, now_ms=later)
    assert action == RunFinished(status=RunStatus.EXPIRED)
    assert state.steps[-1].status is StepStatus.EXPIRED


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_gates_a_tool(approved: bool) -> None:
    gated = SideEffectTool("deploy")
    gated.requires_approval = True
    loop = make_loop([gated])
    model = scripted(calls(("d1", "deploy", {})), "finished")
    clock = Clock()
    state, action = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=clock)
    assert isinstance(action, AwaitClient)
    assert action.required_action.type == "approval"
    assert gated.effects == []
    with pytest.raises(ToolOutputsError):
        loop.submit_tool_outputs(state, {"d1": "x"}, now_ms=clock())
    state = loop.submit_approvals(state, {"d1": approved}, now_ms=clock())
    state, _ = await drive_run(loop, state, thread=THREAD, model=model, clock_ms=clock)
    assert state.status is RunStatus.COMPLETED
    assert gated.effects == (["d1"] if approved else [])
    tool_step = state.steps[1]
    assert tool_step.is_error is (not approved)


async def test_bad_tool_calls_are_reported_to_the_model() -> None:
    loop = make_loop([CalculatorTool()])
    model = scripted(
        calls(("u", "nope", {}), ("v", "calculator", {"wrong": 1})),
        Message.assistant(None, [ToolCall(id="w", name="calculator", arguments="[1, 2]")]),
        "ok",
    )
    state, _ = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert state.status is RunStatus.COMPLETED
    errors = [s.output for s in state.steps if s.type is StepType.TOOL_CALL]
    assert errors[0] == "unknown tool 'nope'"
    assert errors[1] is not None
    assert errors[1].startswith("invalid arguments")
    assert errors[2] is not None
    assert "JSON object" in errors[2]


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"max_steps": 2}, "max_steps"),
        ({"max_tokens_per_run": 40}, "max_tokens"),
        ({"max_chip_seconds_per_run": 0.0002}, "max_chip_seconds"),
    ],
)
async def test_limits_stop_the_run_as_incomplete(limits: dict[str, Any], reason: str) -> None:
    loop = make_loop([CalculatorTool()], **limits)
    model = scripted(*[calls((f"c{i}", "calculator", {"expression": "1"})) for i in range(10)])
    state, action = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert action == RunFinished(status=RunStatus.INCOMPLETE)
    assert state.incomplete_reason == reason
    assert sum(1 for s in state.steps if s.type is StepType.MODEL_CALL) == 2


async def test_max_tokens_per_run_caps_each_call() -> None:
    loop = make_loop(max_tokens_per_run=10_000)
    model = scripted("x")
    await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert model.requests[0].params.max_tokens == 1024


async def test_timeout_stops_the_run() -> None:
    loop = make_loop([CalculatorTool()], timeout_s=1)
    model = scripted(calls(("c", "calculator", {"expression": "1"})), "never")
    state = loop.new_run("r", now_ms=0)
    state, action = loop.advance(state, thread=THREAD, now_ms=0)
    assert isinstance(action, CallModel)
    response = await model.request(action.request)
    state = loop.record_model_response(state, action.step_id, response, now_ms=500)
    state, action = loop.advance(state, thread=THREAD, now_ms=1_500)
    assert action == RunFinished(status=RunStatus.INCOMPLETE)
    assert state.incomplete_reason == "timeout"
    assert state.chip_us == 100  # the finished call stays billed


async def test_cancel_is_idempotent_and_final() -> None:
    loop = make_loop()
    state, action = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=1)
    assert isinstance(action, CallModel)
    cancelled = loop.cancel(state, now_ms=2)
    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.steps[0].status is StepStatus.CANCELLED
    assert loop.cancel(cancelled, now_ms=3) == cancelled
    assert loop.advance(cancelled, thread=THREAD, now_ms=4)[1] == RunFinished(status=RunStatus.CANCELLED)


async def test_recording_a_step_twice_bills_it_once() -> None:
    loop = make_loop()
    state, action = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=1)
    assert isinstance(action, CallModel)
    response = ModelResponse(message=Message.assistant("hi"), usage=Usage(input_tokens=3, output_tokens=2), chip_us=7)
    once = loop.record_model_response(state, action.step_id, response, now_ms=2)
    twice = loop.record_model_response(once, action.step_id, response, now_ms=3)
    assert twice == once
    assert twice.chip_us == 7
    with pytest.raises(InvalidTransitionError):
        loop.record_tool_result(once, action.step_id, ToolResult("x"), now_ms=4)


def test_advance_is_deterministic_and_state_is_json() -> None:
    loop = make_loop([CalculatorTool()])
    a = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=10)
    b = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=10)
    assert a == b
    stored = json.loads(json.dumps(a[0].to_json()))
    assert RunState.model_validate(stored) == a[0]


# --- crash and resume: kill the driver after every checkpoint, restart from the stored JSON ------------


class Crash(Exception):
    pass


async def _run_with_crash(
    crash_at: int, tool_retry: RetrySemantics, *, persisted: bool = True
) -> tuple[RunState, SideEffectTool, int, bool]:
    """Run to completion, crashing once at the ``crash_at``-th checkpoint; return the final state.

    ``persisted`` chooses whether the crash comes just after the state was stored or just before (then the
    work done since the previous checkpoint — a model answer, a tool's side effect — is lost to the store).
    """
    tool = SideEffectTool("post", tool_retry)
    loop = make_loop([tool, CalculatorTool()])
    turns = [
        calls(("p1", "post", {}), ("k1", "calculator", {"expression": "2**10"})),
        calls(("p2", "post", {})),
        "all done",
    ]
    model_calls = 0

    def answer(request: ModelRequest) -> ModelResponse:
        nonlocal model_calls
        model_calls += 1
        done_turns = sum(1 for m in request.messages if m.role == "assistant")
        turn = turns[done_turns]
        message = Message.assistant(turn) if isinstance(turn, str) else turn
        return ModelResponse(message=message, usage=Usage(input_tokens=5, output_tokens=5), chip_us=1_000)

    model = FunctionModel(answer)
    store: list[dict[str, Any]] = []
    count = 0

    async def checkpoint(state: RunState) -> None:
        nonlocal count
        count += 1
        if count == crash_at and not persisted:
            raise Crash
        store.append(json.loads(json.dumps(state.to_json())))
        if count == crash_at:
            raise Crash

    clock = Clock()
    state = loop.new_run("r", now_ms=0)
    store.append(state.to_json())
    crashed = False
    try:
        state, _ = await drive_run(loop, state, thread=THREAD, model=model, clock_ms=clock, checkpoint=checkpoint)
    except Crash:
        # A new worker: nothing survives but the stored state.
        crashed = True
        restored = RunState.model_validate(store[-1])
        state, _ = await drive_run(loop, restored, thread=THREAD, model=model, clock_ms=clock)
    return state, tool, model_calls, crashed


CHECKPOINTS_PER_RUN = 12


async def test_the_crash_matrix_covers_every_checkpoint() -> None:
    *_, crashed = await _run_with_crash(CHECKPOINTS_PER_RUN, RetrySemantics.AT_MOST_ONCE)
    assert crashed
    *_, crashed = await _run_with_crash(CHECKPOINTS_PER_RUN + 1, RetrySemantics.AT_MOST_ONCE)
    assert not crashed


@pytest.mark.parametrize("persisted", [True, False], ids=["after-store", "before-store"])
@pytest.mark.parametrize("retry", [RetrySemantics.AT_MOST_ONCE, RetrySemantics.IDEMPOTENT])
@pytest.mark.parametrize("crash_at", range(1, CHECKPOINTS_PER_RUN + 1))
async def test_crash_at_any_checkpoint_resumes_without_double_billing(
    crash_at: int, retry: RetrySemantics, persisted: bool
) -> None:
    state, tool, model_calls, crashed = await _run_with_crash(crash_at, retry, persisted=persisted)
    assert crashed
    assert state.status is RunStatus.COMPLETED
    model_steps = [s for s in state.steps if s.type is StepType.MODEL_CALL]
    assert [s.status for s in model_steps] == [StepStatus.COMPLETED] * 3
    # Every completed model step is billed exactly once, even when the model was asked twice.
    assert state.chip_us == sum(s.chip_us for s in model_steps) == 3_000
    assert model_calls in (3, 4)
    for call_id in ("p1", "p2"):
        executions = tool.effects.count(call_id)
        if retry is RetrySemantics.AT_MOST_ONCE:
            assert executions <= 1
        else:
            assert executions >= 1
    outputs = {s.tool_call.id: s.output for s in state.steps if s.tool_call is not None}
    assert set(outputs) == {"p1", "k1", "p2"}
    if retry is RetrySemantics.AT_MOST_ONCE:
        lost = [cid for cid in ("p1", "p2") if tool.effects.count(cid) == 0]
        assert all(outputs[cid] == INTERRUPTED_OUTPUT for cid in lost)


async def test_crash_after_recording_a_tool_step_marks_at_most_once_call_interrupted() -> None:
    tool = SideEffectTool("post")
    loop = make_loop([tool])
    state, action = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=1)
    assert isinstance(action, CallModel)
    response = ModelResponse(message=calls(("p", "post", {})))
    state = loop.record_model_response(state, action.step_id, response, now_ms=2)
    state, action = loop.advance(state, thread=THREAD, now_ms=3)
    assert isinstance(action, ExecuteTools)
    # The worker dies here, having perhaps sent the request. The next worker must not send it again.
    state, action = loop.advance(state, thread=THREAD, now_ms=4)
    assert isinstance(action, CallModel)
    tool_step = state.steps[1]
    assert (tool_step.status, tool_step.output, tool_step.retry) == (
        StepStatus.FAILED,
        INTERRUPTED_OUTPUT,
        RetrySemantics.AT_MOST_ONCE,
    )
    assert tool.effects == []


async def test_a_model_call_that_finishes_after_cancel_is_billed_but_dropped() -> None:
    loop = make_loop()
    state, action = loop.advance(loop.new_run("r", now_ms=0), thread=THREAD, now_ms=1)
    assert isinstance(action, CallModel)
    state = loop.cancel(state, now_ms=2)
    response = ModelResponse(message=Message.assistant("late"), usage=Usage(input_tokens=4, output_tokens=1), chip_us=9)
    state = loop.record_model_response(state, action.step_id, response, now_ms=3)
    assert state.status is RunStatus.CANCELLED
    assert state.messages == []
    assert (state.chip_us, state.steps[0].chip_us, state.steps[0].status) == (9, 9, StepStatus.CANCELLED)
    assert loop.record_model_response(state, action.step_id, response, now_ms=4) == state


async def test_a_reused_call_id_in_a_later_turn_is_executed_again() -> None:
    loop = make_loop([CalculatorTool()])
    model = scripted(
        calls(("same", "calculator", {"expression": "1+1"})), calls(("same", "calculator", {"expression": "2+2"})), "ok"
    )
    state, _ = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert state.status is RunStatus.COMPLETED
    assert [s.output for s in state.steps if s.type is StepType.TOOL_CALL] == ['{"result": 2}', '{"result": 4}']


async def test_drive_run_bounds_a_slow_model_by_the_run_timeout() -> None:
    import anyio

    async def slow(request: ModelRequest) -> str:
        await anyio.sleep(30)
        return "never"

    loop = make_loop(timeout_s=0.2)
    with anyio.fail_after(5):
        state, action = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=FunctionModel(slow))
    assert action == RunFinished(status=RunStatus.INCOMPLETE)
    assert state.incomplete_reason == "timeout"
    assert state.steps[0].status is StepStatus.CANCELLED


async def test_drive_run_fails_the_run_on_a_model_error() -> None:
    def broken(request: ModelRequest) -> str:
        raise ConnectionError("pool unavailable")

    loop = make_loop()
    state, _ = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=FunctionModel(broken))
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert (state.last_error.code, state.last_error.message) == ("model_error", "ConnectionError: pool unavailable")


async def test_drive_run_fails_a_refused_model_call_with_the_refusals_code() -> None:
    def refuse(request: ModelRequest) -> str:
        raise ModelCallRefused("budget_exceeded", "agent budget bud_1 has 0.00 left")

    loop = make_loop()
    state, _ = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=FunctionModel(refuse))
    assert state.status is RunStatus.FAILED
    assert state.last_error is not None
    assert (state.last_error.code, state.last_error.message) == ("budget_exceeded", "agent budget bud_1 has 0.00 left")


async def test_an_interrupted_model_call_leaves_the_run_to_resume_not_failed() -> None:
    """The platform's database went away during the call: not the run's fault (it once failed as model_error)."""

    def interrupted(request: ModelRequest) -> str:
        raise ModelCallInterrupted("the database was unavailable")

    loop = make_loop()
    saved: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        saved.append(state)

    with pytest.raises(ModelCallInterrupted):
        await drive_run(
            loop, loop.new_run("r", now_ms=0), thread=THREAD, model=FunctionModel(interrupted), checkpoint=checkpoint
        )
    assert saved
    assert saved[-1].status is RunStatus.IN_PROGRESS
    assert saved[-1].last_error is None
    resumed, _ = await drive_run(loop, saved[-1], thread=THREAD, model=scripted("done"))
    assert resumed.status is RunStatus.COMPLETED


async def test_drive_run_honours_a_cancel_request_between_steps() -> None:
    loop = make_loop([CalculatorTool()])
    model = scripted(calls(("c", "calculator", {"expression": "1"})), "done")
    polls = 0

    async def cancel_after_first_step() -> bool:
        nonlocal polls
        polls += 1
        return polls > 1

    state, action = await drive_run(
        loop,
        loop.new_run("r", now_ms=0),
        thread=THREAD,
        model=model,
        clock_ms=Clock(),
        cancel_requested=cancel_after_first_step,
    )
    assert action == RunFinished(status=RunStatus.CANCELLED)
    assert len(model.requests) == 1
    assert state.chip_us == 100


async def test_a_tool_call_cut_at_max_tokens_is_not_run_and_the_run_stops_incomplete() -> None:
    """An answer cut at its max_tokens (finish_reason length) holds tool calls whose arguments are not whole: running
    them, or asking the model again about them, would spend past what the call was allowed."""
    loop = make_loop([CalculatorTool()])
    cut = ModelResponse(
        message=Message.assistant(None, [ToolCall(id="c1", name="calculator", arguments='{"expression": "6 *')]),
        usage=Usage(input_tokens=10, output_tokens=16),
        chip_us=100,
        finish_reason="length",
    )
    model = FunctionModel(lambda request: cut)
    state, action = await drive_run(loop, loop.new_run("r", now_ms=0), thread=THREAD, model=model, clock_ms=Clock())
    assert action == RunFinished(status=RunStatus.INCOMPLETE)
    assert state.incomplete_reason == "max_tokens"
    assert [s.type for s in state.steps] == [StepType.MODEL_CALL]
    assert len(model.requests) == 1
    assert state.usage.output_tokens == 16
    assert state.messages[-1].tool_calls == ()  # a call the model never finished is no call: nothing awaits its output
