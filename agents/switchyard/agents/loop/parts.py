"""What every part of the run loop shares (see :mod:`switchyard.agents.loop`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from switchyard.agents.context import TokenCounter
from switchyard.agents.errors import InvalidTransitionError, ToolOutputsError
from switchyard.agents.guardrails import Trip
from switchyard.agents.messages import Message, ToolCall
from switchyard.agents.model import default_token_counter
from switchyard.agents.spec import AgentSpec
from switchyard.agents.state import (
    Action,
    AwaitClient,
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
from switchyard.agents.team import Member
from switchyard.agents.tools.base import ToolRegistry, ToolResult

#: The output recorded for an at-most-once tool call whose worker died before its result was recorded.
INTERRUPTED_OUTPUT = (
    "The tool call was interrupted and its outcome is unknown; it was not repeated to avoid a duplicate side effect."
)
DENIED_OUTPUT = "The tool call was not approved and was not executed."
WITHHELD_ANSWER = "The answer was withheld: it tripped an output guardrail."
MAX_FRAMES = 4
"""How deep agents called as tools may nest (an agent calling itself stops there)."""


class LoopParts:
    """What every part of the run loop shares: the agents a run may act as, and recording steps and stops.

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
            agent=acting_agent(state),
            depth=len(state.frames),
        )
        state.steps.append(step)
        return step

    def _complete_tool_step(self, state: RunState, step: Step, result: ToolResult, now_ms: int) -> None:
        """Record a tool call's result: in the conversation that made the call, or (a workflow node's) in the
        workflow."""
        assert step.tool_call is not None
        step.status = StepStatus.FAILED if result.is_error else StepStatus.COMPLETED
        step.completed_at_ms = now_ms
        step.output = result.output
        step.is_error = result.is_error
        if self._is_node(step):
            self._node_answered(state, step, result)
            return
        conversation(state).append(
            Message.tool(step.tool_call.id, result.output).model_copy(update={"id": f"msg_{step.id}"})
        )

    def _is_node(self, step: Step) -> bool:
        """Whether ``step`` is a workflow node's call (an agent node's agent, a tool node's tool), not one a model
        made: a workflow run's own conversation has no model."""
        return self.spec.workflow is not None and step.depth == 0 and step.agent is None

    def _invocation(self, step: Step) -> ToolInvocation:
        assert step.tool_call is not None
        arguments = step.tool_call.parsed_arguments()
        return ToolInvocation(step_id=step.id, tool_call=step.tool_call, arguments=arguments, agent=step.agent)

    def _record_immediate(self, state: RunState, call: ToolCall, result: ToolResult, now_ms: int) -> None:
        tool = self.tools_of(acting_agent(state)).get(call.name)
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

    # -- provided by the parts built on this one ---------------------------------------------------------

    def _next_model_call(self, state: RunState, thread: Sequence[Message], now_ms: int) -> tuple[RunState, Action]:
        """Ask the acting agent's model for its next answer (or stop the run at a limit)."""
        raise NotImplementedError

    def _node_answered(self, state: RunState, step: Step, result: ToolResult) -> None:
        """A workflow node's call ended with ``result``: the workflow records it and goes on."""
        raise NotImplementedError


def input_text(thread: Sequence[Message]) -> str:
    """What a run's input guardrails check: the text of the thread's last user message."""
    for message in reversed(thread):
        if message.role == "user":
            return message.content or ""
    return ""


def acting_agent(state: RunState) -> str | None:
    """The agent acting now: the innermost frame's, else the one handed off to last (``None``: the run's own)."""
    return state.frames[-1].agent if state.frames else state.active_agent


def conversation(state: RunState) -> list[Message]:
    """The messages of the conversation going on: the innermost frame's, else the run's own."""
    return state.frames[-1].messages if state.frames else state.messages
