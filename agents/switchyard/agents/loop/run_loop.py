"""The run loop (see :mod:`switchyard.agents.loop`): starting, stepping, recording and the client's actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from switchyard.agents.context import assemble_context
from switchyard.agents.errors import ContextOverflowError, InvalidTransitionError, ToolOutputsError
from switchyard.agents.guardrails import VERDICT_FORMAT, first_trip
from switchyard.agents.loop.parts import (
    DENIED_OUTPUT,
    INTERRUPTED_OUTPUT,
    WITHHELD_ANSWER,
    acting_agent,
    conversation,
    input_text,
)
from switchyard.agents.loop.workflow import WorkflowNodes
from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.model import ModelRequest, ModelResponse
from switchyard.agents.spec import AgentSpec
from switchyard.agents.state import (
    TERMINAL_STATUSES,
    Action,
    AwaitClient,
    CallModel,
    ExecuteTools,
    RunError,
    RunFinished,
    RunState,
    RunStatus,
    Step,
    StepStatus,
    StepType,
    ToolInvocation,
)
from switchyard.agents.team import HandoffTool
from switchyard.agents.tools.base import RetrySemantics, ToolKind, ToolResult, validate_arguments
from switchyard.agents.workflows import machine as workflow


class RunLoop(WorkflowNodes):
    """The run loop of one agent version (its constructor: :class:`~switchyard.agents.loop.parts.LoopParts`)."""

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
            trip = first_trip(self.spec.guardrails.input, input_text(thread))
            if trip is not None:  # before any model call: the run costs nothing
                return self._tripped(state, trip, "input", now_ms)
            self._open_judge(state, "input", after=-1, text=input_text(thread), answer=None)
            if self.spec.workflow is not None and state.workflow is None:  # (a continuation brings its own)
                state.workflow = workflow.start(self.spec.workflow, input_text(thread))
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
        step.cache_saved_chip_us = response.cache_saved_chip_us
        step.receipt_id = response.receipt_id
        step.ttft_ms = response.ttft_ms
        step.replica = response.replica
        step.finish_reason = response.finish_reason
        state.usage = Usage(
            input_tokens=state.usage.input_tokens + response.usage.input_tokens,
            output_tokens=state.usage.output_tokens + response.usage.output_tokens,
            cached_input_tokens=state.usage.cached_input_tokens + response.usage.cached_input_tokens,
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
            conversation(state).append(message.model_copy(update={"tool_calls": ()}))
            state, _ = self._stop(state, RunStatus.INCOMPLETE, now_ms, reason="max_tokens")
            return state
        conversation(state).append(message)
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

    # -- tool calls and model calls --------------------------------------------------------------------

    def _unanswered_calls(self, state: RunState) -> list[ToolCall]:
        messages = conversation(state)
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
        tools = self.tools_of(acting_agent(state))
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
            options=self._call_options(spec, judging),
        )
        return CallModel(step_id=step.id, request=request)

    def _call_options(self, spec: AgentSpec, judging: bool) -> dict[str, Any]:
        """The further fields of a model call: a judge answers its verdict; an agent with an ``output_schema``
        answers in it, unless the caller asked for a format of its own (a response's ``text.format``)."""
        if judging:
            return {**self.call_options, "response_format": VERDICT_FORMAT}
        if spec.output_schema is not None and "response_format" not in self.call_options:
            return {**self.call_options, "response_format": spec.output_schema.response_format()}
        return self.call_options


_ONE_HANDOFF = "Only one handoff is made per turn; this one was not."
