"""What a trace page shows of a run loop's checkpoint (``RunState``, a run's or a response's): each step with its
tool's arguments and result, handoffs, approvals, guardrail verdicts and a workflow's path through its nodes.

Only what the state records is shown: a guardrail that passed leaves no verdict behind (except a workflow's
guardrail node, whose outcome is on the workflow's trail), so none is shown for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from switchyard.agents import RunState, StepType
from switchyard.agents.messages import Message
from switchyard.agents.state import Step
from switchyard.agents.tools.base import ToolKind
from switchyard.platform.console.pages.trace_timeline import Span

__all__ = [
    "AgentRef",
    "MessageView",
    "StepView",
    "TraceView",
    "Verdict",
    "message_views",
    "pretty_json",
    "trace_view",
]


def pretty_json(text: str | None) -> str:
    """``text`` indented if it is JSON (tool arguments, most results), else as it is."""
    if text is None:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


@dataclass(frozen=True, slots=True)
class AgentRef:
    """An agent or workflow as the page links it: by name when the tenant still has it, else by id."""

    id: str
    name: str
    kind: str = "agent"


@dataclass(frozen=True, slots=True)
class MessageView:
    role: str
    text: str
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, pretty arguments)
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    anchor: str
    title: str
    kind: str  # model call, tool call, handoff, workflow node, agent call
    status: str
    agent: AgentRef
    start_ms: int
    duration_ms: int | None
    step: Step
    arguments: str = ""
    result: str = ""
    is_error: bool = False
    handoff_to: str = ""
    approval: bool | None = None  # the person's decision on the call, when one was asked


@dataclass(frozen=True, slots=True)
class Verdict:
    """A guardrail's verdict the state records: ``tripped`` or ``passed``, where, and why."""

    outcome: str
    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class TraceView:
    steps: list[StepView]
    spans: list[Span]
    answer: MessageView | None
    verdicts: list[Verdict]
    pending: list[tuple[str, str, str]]  # (type, tool name, pretty arguments) the run waits for
    trail: list[tuple[str, str, str]]  # a workflow's (node, node type, outcome)
    error: dict[str, Any] | None
    incomplete_reason: str | None

    @property
    def by_anchor(self) -> dict[str, StepView]:
        """The steps by the id of their details on the page (the timeline's rows link there)."""
        return {step.anchor: step for step in self.steps}


def message_views(messages: list[Message]) -> list[MessageView]:
    return [
        MessageView(
            role=m.role,
            text=m.content or "",
            tool_calls=[(c.name, pretty_json(c.arguments)) for c in m.tool_calls],
            tool_call_id=m.tool_call_id,
        )
        for m in messages
    ]


def _ms(at_ms: int | None, origin_ms: int) -> int:
    return max(0, (at_ms or origin_ms) - origin_ms)


def _handoff_target(step: Step) -> str:
    try:
        return str(json.loads(step.output or "")["assistant"])
    except (ValueError, KeyError, TypeError):
        return step.tool_call.name if step.tool_call else ""


def _step_view(state: RunState, step: Step, agents: dict[str, AgentRef], own: AgentRef, workflow: bool) -> StepView:
    agent = agents.get(step.agent or "", own) if step.agent else own
    start, status = _ms(step.created_at_ms, state.created_at_ms), step.status.value
    anchor = f"step-{step.index}"
    if step.type is StepType.MODEL_CALL:
        title = f"{step.model or 'model'}"
        return StepView(step.index, anchor, title, "model call", status, agent, start, step.duration_ms, step)
    call = step.tool_call
    name = call.name if call else str(step.tool_kind or "tool")
    kind = "tool call"
    if step.tool_kind is ToolKind.HANDOFF:
        kind = "handoff"
    elif step.tool_kind is ToolKind.AGENT:
        kind = "workflow node" if workflow and step.depth == 0 else "agent call"
    decision = state.approvals.get(call.id) if call else None
    return StepView(
        step.index,
        anchor,
        name,
        kind,
        status,
        agent,
        start,
        step.duration_ms,
        step,
        arguments=pretty_json(call.arguments) if call else "",
        result=pretty_json(step.output),
        is_error=step.is_error,
        handoff_to=_handoff_target(step) if kind == "handoff" and not step.is_error else "",
        approval=decision,
    )


def _verdicts(state: RunState) -> list[Verdict]:
    found = []
    if state.workflow is not None:
        for entry in state.workflow.trail:
            if entry.node_type == "guardrail":
                outcome = "passed" if entry.outcome == "passed" else "tripped"
                found.append(Verdict(outcome, f"workflow node {entry.node}", entry.outcome))
    for step in state.steps:
        if step.is_error and step.output and "guardrail" in step.output and "tripped" in step.output:
            found.append(Verdict("tripped", f"step {step.index}", step.output))
    if state.last_error is not None and state.last_error.code == "guardrail_tripped":
        found.append(Verdict("tripped", "the run", state.last_error.message))
    return found


def trace_view(state: RunState, *, agents: dict[str, AgentRef], own: AgentRef) -> TraceView:
    """The page's view of ``state``; ``own`` is the execution's agent (or workflow), ``agents`` every agent its
    steps name (after handoffs, agents called as tools, guardrails' judges)."""
    workflow = state.workflow is not None
    steps = [_step_view(state, step, agents, own, workflow) for step in state.steps]
    spans = []
    if state.started_at_ms is not None:
        spans.append(Span("queue", "queue", 0, _ms(state.started_at_ms, state.created_at_ms)))
    for view in steps:
        end_ms = view.start_ms + (view.duration_ms or 0)
        label = f"{view.index}. {view.title}"
        spans.append(Span(label, view.step.type.value, view.start_ms, max(0, end_ms - view.start_ms), view.anchor))
    answer = next((m for m in reversed(state.messages) if m.role == "assistant" and m.content), None)
    pending: list[tuple[str, str, str]] = []
    if state.required_action is not None:
        action = state.required_action
        pending = [(str(action.type), c.name, pretty_json(c.arguments)) for c in action.tool_calls]
    trail = [(e.node, e.node_type, e.outcome) for e in state.workflow.trail] if state.workflow else []
    return TraceView(
        steps=steps,
        spans=spans,
        answer=message_views([answer])[0] if answer else None,
        verdicts=_verdicts(state),
        pending=pending,
        trail=trail,
        error=state.last_error.model_dump() if state.last_error else None,
        incomplete_reason=state.incomplete_reason,
    )
