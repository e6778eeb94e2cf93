"""The run loop: a pure, synchronous, deterministic state machine (time passed in, no I/O).

Driving it (what a worker does; :func:`switchyard.agents.runner.drive_run` is a reference driver)::

    state = loop.new_run(run_id, now_ms=now())                 # persist state
    while True:
        state, action = loop.advance(state, thread=history, now_ms=now())   # persist state
        match action:
            case CallModel():    response = model(action.request)
                                 state = loop.record_model_response(state, action.step_id, response, now_ms=now())
            case ExecuteTools(): for each invocation: result = tool(...)
                                 state = loop.record_tool_result(state, inv.step_id, result, now_ms=now())
            case AwaitClient():  stop; later submit_tool_outputs / submit_approvals, then advance again
            case RunFinished():  stop
        # persist state after every record_* call

Every transition returns a new :class:`RunState`; persist it before performing the action it asks for.
A worker that dies at any point resumes by loading the last stored state and calling ``advance`` again:

* a model step recorded but not completed is asked for again (its compute is billed only when a response
  is recorded, so never twice);
* a tool step recorded but not completed is executed again if the call is ``idempotent``, and otherwise
  (``at_most_once``) completed with an error output saying the outcome is unknown — never executed twice.

A run may act as other agents (``members``, :mod:`switchyard.agents.team`): the model's ``transfer_to_<name>``
call makes the run go on as that agent (``RunState.active_agent``), on the same messages, at most
``limits.max_handoffs`` times; the run's own agent's limits hold for the whole run. Guardrails
(:mod:`switchyard.agents.guardrails`) check the run's input (the thread's last user message) before its first model
call, with the run's own agent's input guardrails, and its answer with the answering agent's output guardrails; a
trip fails the run with ``guardrail_tripped`` (a tripped answer is replaced by a notice).

An agent called as a tool (``AgentToolSpec``) runs in a frame (``RunState.frames``): a conversation of its own
that starts with the call's ``input`` as the user's message and sees nothing of the caller's; its steps are the
run's (billed to it), and its final answer (checked by its output guardrails) becomes the call's output in the
caller's conversation. Frames nest up to ``MAX_FRAMES`` deep.

A workflow (``AgentSpec.workflow``, :mod:`switchyard.agents.workflows`) makes the run follow its graph instead of
asking its own agent: each ``agent`` node is a call of that agent in a frame (a step named after the node, its
answer the step's output), an ``user_approval`` node waits in ``requires_action`` for an approval of a call named
``approve_<node>``, and the workflow's output is the run's answer (``RunState.workflow`` is where it stands).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from switchyard.agents.context import TokenCounter, assemble_context
from switchyard.agents.errors import ContextOverflowError, InvalidTransitionError, ToolOutputsError
from switchyard.agents.guardrails import VERDICT_FORMAT, Trip, first_trip, verdict_trip
from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.model import ModelRequest, ModelResponse, default_token_counter
from switchyard.agents.spec import AgentGuardrail, AgentSpec
from switchyard.agents.state import (
    TERMINAL_STATUSES,
    Action,
    AwaitClient,
    CallModel,
    ExecuteTools,
    Frame,
    RequiredAction,
    RunError,
    RunFinished,
    RunState,
    RunStatus,
    Step,
    StepStatus,
    StepType,
    ToolInvocation,
)
from switchyard.agents.team import AgentTool, HandoffTool, Member, handoff_output
from switchyard.agents.tools.base import RetrySemantics, ToolKind, ToolRegistry, ToolResult, validate_arguments
from switchyard.agents.workflows import machine as workflow
from switchyard.agents.workflows.spec import AgentNode

__all__ = ["INTERRUPTED_OUTPUT", "RunLoop"]

#: The output recorded for an at-most-once tool call whose worker died before its result was recorded.
INTERRUPTED_OUTPUT = (
    "The tool call was interrupted and its outcome is unknown; it was not repeated to avoid a duplicate side effect."
)
DENIED_OUTPUT = "The tool call was not approved and was not executed."
WITHHELD_ANSWER = "The answer was withheld: it tripped an output guardrail."
MAX_FRAMES = 4
"""How deep agents called as tools may nest (an agent calling itself stops there)."""


class RunLoop:
    """The run loop of one agent version.

    ``tools`` are the agent's tools (MCP tools already listed); ``context_window_tokens`` is the window of
    the model in use; ``token_counter`` counts tokens of a text for that model; ``reserved_output_tokens``
    is the room kept for the answer when the agent sets no ``max_tokens``; ``call_options`` are further
    chat-completions fields sent with every model call (``ModelRequest.options``); ``members`` are the agents
    the run may act as after a handoff, by agent id (their tools include their own handoffs).
    """

    def __init__(
        self,
        spec: AgentSpec,
        tools: ToolRegistry,
        *,
        context_window_tokens: int,
        token_counter: TokenCounter = default_token_counter,
        reserved_output_tokens: int = 1024,
        call_options: Mapping[str, Any] | None = None,
        members: Mapping[str, Member] | None = None,
    ) -> None:
        self.spec = spec
        self.members = dict(members or {})
        self.call_options = dict(call_options or {})
        self.tools = tools
        self.context_window_tokens = context_window_tokens
        self.token_counter = token_counter
        self.reserved_output_tokens = reserved_output_tokens

    def acting(self, agent: str | None) -> tuple[AgentSpec, ToolRegistry, int]:
        """The spec, tools and context window of ``agent`` (``None``: the run's own)."""
        member = self.members.get(agent) if agent is not None else None
        if member is None:
            return self.spec, self.tools, self.context_window_tokens
        return member.spec, member.tools, member.context_window_tokens

    def tools_of(self, agent: str | None) -> ToolRegistry:
        return self.acting(agent)[1]

    # -- starting and stepping -------------------------------------------------------------------------

    def new_run(self, run_id: str, *, now_ms: int) -> RunState:
        """A queued run."""
        return RunState(run_id=run_id, created_at_ms=now_ms)

    def advance(self, state: RunState, *, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        """Decide the next action; the returned state records the steps the action starts.

        ``thread`` is the thread's history as of the run's creation (the run's own messages are in the
        state). Call this again only after recording the previous action's results — or to resume after a
        crash, which is what an unfinished step then means.
        """
        state = state.model_copy(deep=True)
        if state.status in TERMINAL_STATUSES:
            return state, RunFinished(status=state.status)
        if state.status is RunStatus.QUEUED:
            state.status = RunStatus.IN_PROGRESS
            state.started_at_ms = now_ms
            self._bump(state)
            trip = first_trip(self.spec.guardrails.input, _input_text(thread))
            if trip is not None:  # before any model call: the run costs nothing
                return self._tripped(state, trip, "input", now_ms)
            self._open_judge(state, "input", after=-1, text=_input_text(thread), answer=None)
            if self.spec.workflow is not None and state.workflow is None:  # (a continuation brings its own)
                state.workflow = workflow.start(self.spec.workflow, _input_text(thread))
        started = state.started_at_ms if state.started_at_ms is not None else now_ms
        if now_ms - started >= self.spec.limits.timeout_s * 1000:
            return self._stop(state, RunStatus.INCOMPLETE, now_ms, reason="timeout")
        if state.status is RunStatus.REQUIRES_ACTION:
            assert state.required_action is not None
            if now_ms >= state.required_action.expires_at_ms:
                return self._stop(state, RunStatus.EXPIRED, now_ms)
            return state, AwaitClient(required_action=state.required_action)

        # Resume: an unfinished model step is asked for again; unfinished tool steps are retried or closed.
        pending_model = [s for s in state.steps if s.type is StepType.MODEL_CALL and s.status is StepStatus.IN_PROGRESS]
        if pending_model:
            return state, self._call_model_action(state, thread, pending_model[0])
        retry: list[ToolInvocation] = []
        for step in state.steps:
            if step.type is not StepType.TOOL_CALL or step.status is not StepStatus.IN_PROGRESS:
                continue
            if step.tool_kind in (ToolKind.FUNCTION, ToolKind.AGENT):
                continue  # the client answers the first; the second's agent is a frame
            assert step.tool_call is not None
            if step.retry is RetrySemantics.IDEMPOTENT:
                retry.append(self._invocation(step))
            else:
                self._complete_tool_step(state, step, ToolResult(INTERRUPTED_OUTPUT, is_error=True), now_ms)
        if retry:
            self._bump(state)
            return state, ExecuteTools(invocations=tuple(retry))

        unanswered = self._unanswered_calls(state)
        if unanswered:
            action = self._handle_tool_calls(state, unanswered, now_ms)
            if action is not None:
                return state, action
        pending_client = [
            s.tool_call
            for s in state.steps
            if s.tool_call is not None and s.tool_kind is ToolKind.FUNCTION and s.status is StepStatus.IN_PROGRESS
        ]
        if pending_client:
            return state, self._require(state, "submit_tool_outputs", pending_client, now_ms)
        self._open_frames(state, now_ms)
        if self.spec.workflow is not None and not state.frames:
            return self._next_node(state, thread, now_ms)
        return self._next_model_call(state, thread, now_ms)

    # -- workflows -------------------------------------------------------------------------------------

    def _next_node(self, state: RunState, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        """Take the workflow to its next agent, approval or end."""
        graph, flow = self.spec.workflow, state.workflow
        assert graph is not None
        assert flow is not None
        if flow.status is workflow.WorkflowStatus.AWAITING_APPROVAL:
            decision = state.approvals.get(_approval_id(state))
            if decision is None:  # resumed before the person decided: ask again
                return state, self._ask_approval(state, now_ms)
            flow = workflow.record_approval(graph, flow, str(flow.node), decision)
        flow, action = workflow.advance(graph, flow)
        state.workflow = flow
        self._bump(state)
        if isinstance(action, workflow.RunAgent):
            step = self._new_step(state, StepType.TOOL_CALL, now_ms)
            arguments = json.dumps({"input": action.input})
            step.tool_call = ToolCall(id=f"call_{step.id}", name=action.node, arguments=arguments)
            step.tool_kind = ToolKind.AGENT
            step.retry = RetrySemantics.IDEMPOTENT
            self._open_frames(state, now_ms)
            if state.frames:
                return self._next_model_call(state, thread, now_ms)
            return self._next_node(state, thread, now_ms)  # refused: the workflow failed
        if isinstance(action, workflow.AwaitApproval):
            return state, self._ask_approval(state, now_ms)
        if action.status is workflow.WorkflowStatus.COMPLETED:
            answer = Message.assistant(action.output or "").model_copy(update={"id": f"msg_{state.run_id}_output"})
            state.messages.append(answer)
            state.status = RunStatus.COMPLETED
            state.completed_at_ms = now_ms
            return state, RunFinished(status=state.status)
        error = flow.error or workflow.WorkflowError(code="workflow_failed", message="the workflow failed")
        stopped, finished = self._stop(state, RunStatus.FAILED, now_ms)
        stopped.last_error = RunError(code=error.code, message=error.message)
        return stopped, finished

    def _ask_approval(self, state: RunState, now_ms: int) -> AwaitClient:
        assert self.spec.workflow is not None
        assert state.workflow is not None
        node = str(state.workflow.node)
        _, action = workflow.advance(self.spec.workflow, state.workflow)  # the same AwaitApproval, its message
        message = action.message if isinstance(action, workflow.AwaitApproval) else ""
        call = ToolCall(id=_approval_id(state), name=f"approve_{node}", arguments=json.dumps({"message": message}))
        return self._require(state, "approval", [call], now_ms)

    def _node_answered(self, state: RunState, step: Step, result: ToolResult, now_ms: int) -> None:
        """An agent node's agent answered (or could not be asked): the workflow records it and goes on."""
        assert self.spec.workflow is not None
        assert state.workflow is not None
        assert step.tool_call is not None
        step.status = StepStatus.FAILED if result.is_error else StepStatus.COMPLETED
        step.completed_at_ms = now_ms
        step.output = result.output
        step.is_error = result.is_error
        node = step.tool_call.name
        if result.is_error:
            state.workflow = workflow.fail(state.workflow, "agent_error", f"node {node!r}: {result.output}")
        else:
            state.workflow = workflow.record_agent_output(self.spec.workflow, state.workflow, node, result.output)
        self._bump(state)

    def record_model_response(self, state: RunState, step_id: str, response: ModelResponse, *, now_ms: int) -> RunState:
        """Complete a model step: bill its tokens and chip-µs once, append the assistant message.

        Recording the same step again returns the state unchanged (at-most-once billing). A response for a
        step the run cancelled or expired meanwhile is billed but its message is dropped.
        """
        state = state.model_copy(deep=True)
        step = self._find(state, step_id, StepType.MODEL_CALL)
        if step.usage is not None:
            return state  # already recorded
        if response.message.role != "assistant":
            raise InvalidTransitionError("a model response must be an assistant message")
        if step.status is StepStatus.IN_PROGRESS:
            step.status = StepStatus.COMPLETED
            step.completed_at_ms = now_ms
        step.usage = response.usage
        step.chip_us = response.chip_us
        step.receipt_id = response.receipt_id
        step.ttft_ms = response.ttft_ms
        step.replica = response.replica
        step.finish_reason = response.finish_reason
        state.usage = Usage(
            input_tokens=state.usage.input_tokens + response.usage.input_tokens,
            output_tokens=state.usage.output_tokens + response.usage.output_tokens,
        )
        state.chip_us += response.chip_us
        self._bump(state)
        if step.status is not StepStatus.COMPLETED or state.status is not RunStatus.IN_PROGRESS:
            return state  # the run stopped while the model worked: the compute is billed, the answer dropped
        message = response.message.model_copy(update={"id": f"msg_{step_id}"})
        if state.frames and state.frames[-1].guarding is not None:
            return self._judged(state, message, now_ms)
        if not message.tool_calls and state.frames:
            self._close_frame(state, message, now_ms)
            return state
        if not message.tool_calls:
            trip = first_trip(self.acting(step.agent)[0].guardrails.output, message.content or "")
            if trip is not None:
                state.messages.append(message.model_copy(update={"content": WITHHELD_ANSWER}))
                state, _ = self._tripped(state, trip, "output", now_ms)
                return state
            if self._open_judge(state, "output", after=-1, text=message.content or "", answer=message):
                return state  # held until its judges rule
        if response.finish_reason == "length" and message.tool_calls:
            # cut at max_tokens: its tool calls' arguments are not whole, and running them or asking the model
            # again would spend past what the call was allowed, so the run stops with what it has
            _conversation(state).append(message.model_copy(update={"tool_calls": ()}))
            state, _ = self._stop(state, RunStatus.INCOMPLETE, now_ms, reason="max_tokens")
            return state
        _conversation(state).append(message)
        if not message.tool_calls:
            state.status = RunStatus.COMPLETED
            state.completed_at_ms = now_ms
        return state

    def record_tool_result(self, state: RunState, step_id: str, result: ToolResult, *, now_ms: int) -> RunState:
        """Complete a worker-side tool step with its output (recording it again changes nothing)."""
        state = state.model_copy(deep=True)
        step = self._find(state, step_id, StepType.TOOL_CALL)
        if step.status is not StepStatus.IN_PROGRESS:
            return state
        self._complete_tool_step(state, step, result, now_ms)
        self._bump(state)
        return state

    # -- client actions --------------------------------------------------------------------------------

    def submit_tool_outputs(self, state: RunState, outputs: Mapping[str, str], *, now_ms: int) -> RunState:
        """Accept the outputs of every pending function call at once (unknown or missing ids are errors)."""
        action = self._required(state, "submit_tool_outputs", now_ms)
        pending = {call.id for call in action.tool_calls}
        unknown = sorted(set(outputs) - pending)
        if unknown:
            raise ToolOutputsError("unknown_tool_call", f"no pending tool call with id {', '.join(unknown)}")
        missing = sorted(pending - set(outputs))
        if missing:
            raise ToolOutputsError("missing_tool_outputs", f"outputs missing for {', '.join(missing)}")
        state = state.model_copy(deep=True)
        for step in state.steps:
            if step.tool_call is not None and step.tool_call.id in outputs and step.status is StepStatus.IN_PROGRESS:
                self._complete_tool_step(state, step, ToolResult(outputs[step.tool_call.id]), now_ms)
        return self._resume(state)

    def submit_approvals(self, state: RunState, decisions: Mapping[str, bool], *, now_ms: int) -> RunState:
        """Approve or deny every call awaiting approval (unknown or missing ids are errors)."""
        action = self._required(state, "approval", now_ms)
        pending = {call.id for call in action.tool_calls}
        unknown = sorted(set(decisions) - pending)
        if unknown:
            raise ToolOutputsError("unknown_tool_call", f"no call awaiting approval with id {', '.join(unknown)}")
        missing = sorted(pending - set(decisions))
        if missing:
            raise ToolOutputsError("missing_tool_outputs", f"decisions missing for {', '.join(missing)}")
        state = state.model_copy(deep=True)
        state.approvals.update({k: bool(v) for k, v in decisions.items()})
        return self._resume(state)

    def cancel(self, state: RunState, *, now_ms: int) -> RunState:
        """Cancel the run (idempotent; a finished run is left as it is)."""
        if state.status in TERMINAL_STATUSES:
            return state
        state, _ = self._stop(state.model_copy(deep=True), RunStatus.CANCELLED, now_ms)
        return state

    def fail(self, state: RunState, *, code: str, message: str, now_ms: int) -> RunState:
        """Fail the run with ``last_error`` (for errors outside the loop, e.g. the model being unavailable)."""
        if state.status in TERMINAL_STATUSES:
            return state
        state, _ = self._stop(state.model_copy(deep=True), RunStatus.FAILED, now_ms)
        state.last_error = RunError(code=code, message=message)
        return state

    # -- internals -------------------------------------------------------------------------------------

    @staticmethod
    def _bump(state: RunState) -> None:
        state.revision += 1

    def _tripped(self, state: RunState, trip: Trip, where: str, now_ms: int) -> tuple[RunState, Action]:
        stopped, finished = self._stop(state, RunStatus.FAILED, now_ms)
        stopped.last_error = RunError(code="guardrail_tripped", message=trip.message(where))
        return stopped, finished

    def _stop(
        self, state: RunState, status: RunStatus, now_ms: int, *, reason: str | None = None
    ) -> tuple[RunState, Action]:
        step_status = StepStatus.EXPIRED if status is RunStatus.EXPIRED else StepStatus.CANCELLED
        for step in state.steps:
            if step.status is StepStatus.IN_PROGRESS:
                step.status = step_status
                step.completed_at_ms = now_ms
        state.status = status
        state.required_action = None
        state.completed_at_ms = now_ms
        state.incomplete_reason = reason
        self._bump(state)
        return state, RunFinished(status=status)

    def _find(self, state: RunState, step_id: str, kind: StepType) -> Step:
        try:
            step = state.step(step_id)
        except KeyError:
            raise InvalidTransitionError(f"unknown step {step_id!r}") from None
        if step.type is not kind:
            raise InvalidTransitionError(f"step {step_id!r} is a {step.type.value}")
        return step

    def _required(self, state: RunState, kind: str, now_ms: int) -> RequiredAction:
        action = state.required_action
        if state.status is not RunStatus.REQUIRES_ACTION or action is None or action.type != kind:
            raise ToolOutputsError("no_pending_action", f"the run is not waiting for {kind.replace('_', ' ')}")
        if now_ms >= action.expires_at_ms:
            raise ToolOutputsError("expired", "the required action has expired")
        return action

    def _resume(self, state: RunState) -> RunState:
        state.status = RunStatus.IN_PROGRESS
        state.required_action = None
        self._bump(state)
        return state

    def _new_step(self, state: RunState, kind: StepType, now_ms: int) -> Step:
        index = len(state.steps)
        step = Step(
            id=f"{state.run_id}_step_{index}",
            index=index,
            type=kind,
            created_at_ms=now_ms,
            agent=_acting_agent(state),
            depth=len(state.frames),
        )
        state.steps.append(step)
        return step

    def _complete_tool_step(self, state: RunState, step: Step, result: ToolResult, now_ms: int) -> None:
        assert step.tool_call is not None
        step.status = StepStatus.FAILED if result.is_error else StepStatus.COMPLETED
        step.completed_at_ms = now_ms
        step.output = result.output
        step.is_error = result.is_error
        _conversation(state).append(
            Message.tool(step.tool_call.id, result.output).model_copy(update={"id": f"msg_{step.id}"})
        )

    def _invocation(self, step: Step) -> ToolInvocation:
        assert step.tool_call is not None
        arguments = step.tool_call.parsed_arguments()
        return ToolInvocation(step_id=step.id, tool_call=step.tool_call, arguments=arguments, agent=step.agent)

    def _unanswered_calls(self, state: RunState) -> list[ToolCall]:
        messages = _conversation(state)
        last_index = next((i for i in reversed(range(len(messages))) if messages[i].role == "assistant"), None)
        if last_index is None:
            return []
        last_assistant = messages[last_index]
        answered = {m.tool_call_id for m in messages[last_index + 1 :] if m.role == "tool"}
        recorded = {
            s.tool_call.id for s in state.steps if s.tool_call is not None and s.status is StepStatus.IN_PROGRESS
        }
        return [c for c in last_assistant.tool_calls if c.id not in answered and c.id not in recorded]

    def _handle_tool_calls(self, state: RunState, calls: list[ToolCall], now_ms: int) -> Action | None:
        """Record steps for new tool calls; return the action they need, or ``None`` to carry on."""
        tools = self.tools_of(_acting_agent(state))
        needs_approval: list[ToolCall] = []
        runnable: list[tuple[ToolCall, dict[str, object]]] = []
        handoff: tuple[ToolCall, HandoffTool] | None = None
        for call in calls:
            tool = tools.get(call.name)
            if isinstance(tool, HandoffTool):
                if handoff is not None:
                    self._record_immediate(state, call, ToolResult(_ONE_HANDOFF, is_error=True), now_ms)
                else:
                    handoff = (call, tool)
                continue
            error: str | None = None
            arguments: dict[str, object] = {}
            if tool is None:
                error = f"unknown tool {call.name!r}"
            else:
                try:
                    arguments = call.parsed_arguments()
                except ValueError as exc:
                    error = f"arguments are not a JSON object: {exc}"
                else:
                    error = validate_arguments(tool.definition.parameters, arguments)
            if error is not None:
                self._record_immediate(state, call, ToolResult(error, is_error=True), now_ms)
                continue
            assert tool is not None
            if tool.requires_approval and call.id not in state.approvals:
                needs_approval.append(call)
                continue
            if tool.requires_approval and not state.approvals[call.id]:
                self._record_immediate(state, call, ToolResult(DENIED_OUTPUT, is_error=True), now_ms)
                continue
            runnable.append((call, arguments))
        if needs_approval:
            return self._require(state, "approval", needs_approval, now_ms)
        invocations: list[ToolInvocation] = []
        for call, arguments in runnable:
            tool = tools.get(call.name)
            assert tool is not None
            step = self._new_step(state, StepType.TOOL_CALL, now_ms)
            step.tool_call = call
            step.tool_kind = tool.kind
            step.retry = tool.retry_semantics(arguments)
            if tool.kind not in (ToolKind.FUNCTION, ToolKind.AGENT):  # the client's, or run in a frame
                invocations.append(self._invocation(step))
        if handoff is not None:  # after the calls of the agent that asked for it
            self._hand_off(state, *handoff, now_ms=now_ms)
        self._bump(state)
        if invocations:
            return ExecuteTools(invocations=tuple(invocations))
        return None

    def _hand_off(self, state: RunState, call: ToolCall, tool: HandoffTool, *, now_ms: int) -> None:
        """Record the transfer as a completed tool call; the run goes on as the target, within ``max_handoffs``."""
        done = sum(1 for s in state.steps if s.tool_kind is ToolKind.HANDOFF and not s.is_error)
        target = self.members.get(tool.target)
        if target is None:
            result = ToolResult(f"the agent {tool.target!r} is not available", is_error=True)
        elif done >= self.spec.limits.max_handoffs:
            result = ToolResult(f"no more handoffs: this run made {done}, its limit", is_error=True)
        else:
            result = ToolResult(handoff_output(target.spec.name))
        self._record_immediate(state, call, result, now_ms)
        if result.is_error:
            return
        if state.frames:  # an agent called as a tool hands off within its own conversation
            state.frames[-1].agent = tool.target
        else:
            state.active_agent = tool.target

    def _open_frames(self, state: RunState, now_ms: int) -> None:
        """Start the first agent tool call of this conversation that waits for its agent (one frame at a time)."""
        depth = len(state.frames)
        opened = {frame.step_id for frame in state.frames}
        for step in state.steps:
            if step.tool_kind is not ToolKind.AGENT or step.status is not StepStatus.IN_PROGRESS:
                continue
            if step.depth != depth or step.id in opened:
                continue
            assert step.tool_call is not None
            target = self.members.get(self._target_of(step) or "")
            task = str(step.tool_call.parsed_arguments().get("input", ""))
            refusal: str | None = None
            if target is None:
                refusal = f"the agent behind {step.tool_call.name!r} is not available"
            elif depth >= MAX_FRAMES:
                refusal = f"agents called as tools nest at most {MAX_FRAMES} deep"
            elif (trip := first_trip(target.spec.guardrails.input, task)) is not None:
                refusal = trip.message("input")
            if refusal is not None or target is None:
                refused = ToolResult(refusal or "", is_error=True)
                if self._is_node(step):
                    self._node_answered(state, step, refused, now_ms)
                else:
                    self._complete_tool_step(state, step, refused, now_ms)
                continue
            first = Message.user(task).model_copy(update={"id": f"msg_{step.id}_input"})
            state.frames.append(Frame(step_id=step.id, agent=target.agent_id, messages=[first]))
            self._bump(state)
            return

    def _is_node(self, step: Step) -> bool:
        """Whether ``step`` is a workflow's agent node (not an agent tool's call)."""
        return self.spec.workflow is not None and step.depth == 0 and step.agent is None

    def _target_of(self, step: Step) -> str | None:
        """The agent an agent tool's call (or a workflow's agent node) runs."""
        assert step.tool_call is not None
        if self._is_node(step):
            assert self.spec.workflow is not None
            node = self.spec.workflow.node(step.tool_call.name)
            return node.agent_id if isinstance(node, AgentNode) else None
        tool = self.tools_of(step.agent).get(step.tool_call.name)
        return tool.target if isinstance(tool, AgentTool) else None

    def _judges(self, state: RunState, guarding: str) -> list[AgentGuardrail | None]:
        """The guardrails on the run's input (its own agent's) or on the answer (the answering agent's), by index;
        ``None`` for those checked without a judge."""
        spec = self.spec if guarding == "input" else self.acting(_acting_agent(state))[0]
        checks = spec.guardrails.input if guarding == "input" else spec.guardrails.output
        return [g if isinstance(g, AgentGuardrail) else None for g in checks]

    def _open_judge(
        self, state: RunState, guarding: Literal["input", "output"], *, after: int, text: str, answer: Message | None
    ) -> bool:
        """Open a frame for the next agent guardrail after index ``after`` on ``text``; whether there was one."""
        for index, judge in enumerate(self._judges(state, guarding)):
            if index <= after or judge is None:
                continue
            first = Message.user(text).model_copy(update={"id": f"msg_{state.run_id}_{guarding}_judge_{index}"})
            frame = Frame(agent=judge.agent_id, messages=[first], guarding=guarding, guardrail=index, answer=answer)
            state.frames.append(frame)
            self._bump(state)
            return True
        return False

    def _judged(self, state: RunState, verdict: Message, now_ms: int) -> RunState:
        """A judge answered: the text goes on to the next judge, or on (a held answer is given); or the run fails."""
        frame = state.frames.pop()
        assert frame.guarding is not None
        judge = self._judges(state, frame.guarding)[frame.guardrail]
        assert judge is not None
        trip = verdict_trip(judge, verdict.content or "")
        if trip is not None:
            if frame.answer is not None:
                state.messages.append(frame.answer.model_copy(update={"content": WITHHELD_ANSWER}))
            state, _ = self._tripped(state, trip, frame.guarding, now_ms)
            return state
        text = frame.messages[0].content or ""
        if self._open_judge(state, frame.guarding, after=frame.guardrail, text=text, answer=frame.answer):
            return state
        if frame.answer is not None:
            state.messages.append(frame.answer)
            state.status = RunStatus.COMPLETED
            state.completed_at_ms = now_ms
        return state

    def _close_frame(self, state: RunState, answer: Message, now_ms: int) -> None:
        """The agent of the innermost frame answered: its answer (if its output guardrails pass) is the output of
        the call that started it, in the caller's conversation."""
        frame = state.frames.pop()
        assert frame.step_id is not None  # an agent called as a tool (judges close in _judged)
        spec = self.acting(frame.agent)[0]
        trip = first_trip(spec.guardrails.output, answer.content or "")
        result = ToolResult(answer.content or "") if trip is None else ToolResult(trip.message("output"), is_error=True)
        step = state.step(frame.step_id)
        if self._is_node(step):
            self._node_answered(state, step, result, now_ms)
        else:
            self._complete_tool_step(state, step, result, now_ms)

    def _record_immediate(self, state: RunState, call: ToolCall, result: ToolResult, now_ms: int) -> None:
        tool = self.tools_of(_acting_agent(state)).get(call.name)
        step = self._new_step(state, StepType.TOOL_CALL, now_ms)
        step.tool_call = call
        step.tool_kind = tool.kind if tool is not None else None
        self._complete_tool_step(state, step, result, now_ms)
        self._bump(state)

    def _require(self, state: RunState, kind: str, calls: Sequence[ToolCall], now_ms: int) -> AwaitClient:
        ttl_ms = int(self.spec.limits.requires_action_ttl_s * 1000)
        action = RequiredAction(type=kind, tool_calls=tuple(calls), expires_at_ms=now_ms + ttl_ms)  # type: ignore[arg-type]
        state.status = RunStatus.REQUIRES_ACTION
        state.required_action = action
        self._bump(state)
        return AwaitClient(required_action=action)

    def _limit_tripped(self, state: RunState) -> str | None:
        limits = self.spec.limits
        model_calls = sum(1 for s in state.steps if s.type is StepType.MODEL_CALL)
        if model_calls >= limits.max_steps:
            return "max_steps"
        if limits.max_tokens_per_run is not None and state.usage.total_tokens >= limits.max_tokens_per_run:
            return "max_tokens"
        if limits.max_chip_seconds_per_run is not None and state.chip_us >= limits.max_chip_seconds_per_run * 1e6:
            return "max_chip_seconds"
        return None

    def _next_model_call(self, state: RunState, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        tripped = self._limit_tripped(state)
        if tripped is not None:
            return self._stop(state, RunStatus.INCOMPLETE, now_ms, reason=tripped)
        step = self._new_step(state, StepType.MODEL_CALL, now_ms)
        step.model = self.acting(step.agent)[0].model
        try:
            action = self._call_model_action(state, thread, step)
        except ContextOverflowError as exc:
            state.steps.pop()
            failed, finished = self._stop(state, RunStatus.FAILED, now_ms)
            failed.last_error = RunError(code="context_length_exceeded", message=str(exc))
            return failed, finished
        self._bump(state)
        return state, action

    def _call_model_action(self, state: RunState, thread: Sequence[Message], step: Step) -> CallModel:
        spec, registry, window = self.acting(step.agent)
        judging = bool(state.frames) and state.frames[-1].guarding is not None
        tools = () if judging else tuple(d.to_openai() for d in registry.definitions())
        params = spec.model_params
        reserved = params.max_tokens or self.reserved_output_tokens
        context = assemble_context(
            instructions=spec.instructions,
            history=list(state.frames[-1].messages) if state.frames else [*thread, *state.messages],
            tools=tools,
            context_window_tokens=window,
            reserved_output_tokens=reserved,
            counter=self.token_counter,
        )
        step.dropped_messages = context.dropped_messages
        limit = self.spec.limits.max_tokens_per_run
        if limit is not None:
            remaining = max(1, limit - state.usage.total_tokens - context.input_tokens)
            params = params.model_copy(update={"max_tokens": min(reserved, remaining)})
        request = ModelRequest(
            model=spec.model,
            agent=step.agent,
            messages=context.messages,
            tools=tools,
            params=params,
            request_id=step.id,
            options={**self.call_options, "response_format": VERDICT_FORMAT} if judging else self.call_options,
        )
        return CallModel(step_id=step.id, request=request)


_ONE_HANDOFF = "Only one handoff is made per turn; this one was not."


def _input_text(thread: Sequence[Message]) -> str:
    """What a run's input guardrails check: the text of the thread's last user message."""
    for message in reversed(thread):
        if message.role == "user":
            return message.content or ""
    return ""


def _acting_agent(state: RunState) -> str | None:
    """The agent acting now: the innermost frame's, else the one handed off to last (``None``: the run's own)."""
    return state.frames[-1].agent if state.frames else state.active_agent


def _conversation(state: RunState) -> list[Message]:
    """The messages of the conversation going on: the innermost frame's, else the run's own."""
    return state.frames[-1].messages if state.frames else state.messages


def _approval_id(state: RunState) -> str:
    """The id of the call a workflow's approval is asked for (stable until the workflow moves on, and across the
    responses that continue one another)."""
    assert state.workflow is not None
    return f"approve_{state.workflow.node}_{state.workflow.transitions}"
