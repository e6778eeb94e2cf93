"""Spans of the agents a job acts as, and of a workflow's nodes, while the kernel drives the run loop.

A run may act as several agents: the one handed off to last (``RunState.active_agent``), agents called as tools
and a workflow's ``agent`` nodes (each in a frame, ``RunState.frames``) and guardrail judges (frames too). Which
agent acts is read from each state the loop checkpoints, so the loop itself knows nothing of tracing.
:func:`drive_traced` keeps a span ``invoke_agent {agent name}`` open while an agent acts (GenAI ``gen_ai.agent.*``
attributes; nested as the frames nest; the tokens and chip-µs of its calls) and, in a workflow, a span
``workflow_node {node id}`` around each agent node's agent. Each model call (``chat {model}``) and tool call
(``execute_tool {name}``) is a child of the span of the agent that made it; all are under the job's own span
(``invoke_agent``, from :func:`~switchyard.platform.observability.instrument.traced_run`).

Nodes that run no agent (``if_else``, ``while``, ``set_state``, ``transform``, ``end``, a decided
``user_approval``) take no time: each move in the workflow's trail is a span of no duration, with its outcome;
a ``user_approval`` node reached is one with the outcome ``awaiting_approval``.

The spans belong to one drive, in one process: a job put aside and resumed, or taken over after its worker died,
goes on in new spans of the same names (a span is never kept open across processes).
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from switchyard.agents import (
    Action,
    Model,
    ModelCallInterrupted,
    ModelRequest,
    ModelResponse,
    RunLoop,
    RunState,
    drive_run,
)
from switchyard.agents.runner import Checkpoint
from switchyard.agents.workflows.machine import TrailEntry, WorkflowStatus
from switchyard.platform.observability.tracing import PROVIDER, enabled, tracer

__all__ = ["acting_context", "drive_traced"]

log = logging.getLogger(__name__)
_DRIVING: ContextVar[_AgentSpans | None] = ContextVar("switchyard_agent_spans", default=None)


async def drive_traced(
    loop: RunLoop,
    state: RunState,
    *,
    agent_id: str | None,
    model: Model,
    checkpoint: Checkpoint,
    **options: Any,
) -> tuple[RunState, Action]:
    """``drive_run(loop, state, model=model, checkpoint=checkpoint, **options)`` with a span per agent acting and
    per workflow node; ``agent_id`` is the job's own agent's (a workflow's id), ``None`` for an ad-hoc one."""
    if not enabled():
        return await drive_run(loop, state, model=model, checkpoint=checkpoint, **options)
    spans = _AgentSpans(loop, agent_id=agent_id, state=state)

    async def observed(new: RunState) -> None:
        await checkpoint(new)
        try:  # once stored: a state the store refused (a stale job) was never the job's
            spans.observe(new)
        except Exception:  # tracing must not fail a run
            log.warning("could not trace the agents of %s", new.run_id, exc_info=True)
            spans.close(None)

    token = _DRIVING.set(spans)
    try:
        return await drive_run(loop, state, model=_ActingModel(model, spans), checkpoint=observed, **options)
    except ModelCallInterrupted:
        spans.close(None)  # put aside to resume later (a deferred admission, a backend away): no error of the run
        raise
    except BaseException as exc:
        spans.close(exc)
        raise
    finally:
        _DRIVING.reset(token)
        spans.close(None)


def acting_context() -> otel_context.Context | None:
    """The trace context of the agent acting in the drive under way (where its tool calls' spans go), if any."""
    spans = _DRIVING.get()
    acting = spans.acting() if spans is not None else None
    return trace.set_span_in_context(acting.span) if acting is not None else None


@dataclass(frozen=True)
class _Scope:
    """A span a state asks for: a workflow node (``node``, run by the step ``key`` names) or an agent acting."""

    key: tuple[Any, ...]
    node: str | None = None
    agent: str | None = None
    """The agent's id (``None``: the job's own)."""
    guarding: str | None = None


@dataclass
class _Open:
    scope: _Scope
    span: Span
    input_tokens: int = 0
    output_tokens: int = 0
    chip_us: int = 0

    def add(self, response: ModelResponse) -> None:
        self.input_tokens += response.usage.input_tokens
        self.output_tokens += response.usage.output_tokens
        self.chip_us += response.chip_us


def _scopes(state: RunState, *, workflow: bool) -> list[_Scope]:
    """The spans ``state`` asks for, outermost first: the agent acting at the top (none in a workflow: its nodes
    act), then per frame its workflow node (a top frame of a workflow that is no judge) and its agent."""
    scopes = [] if workflow else [_Scope(key=("agent", state.active_agent), agent=state.active_agent)]
    for depth, frame in enumerate(state.frames):
        if workflow and depth == 0 and frame.step_id is not None:
            step = next((s for s in state.steps if s.id == frame.step_id), None)
            if step is not None and step.tool_call is not None:
                scopes.append(_Scope(key=("node", frame.step_id), node=step.tool_call.name))
        key = ("frame", depth, frame.step_id, frame.guarding, frame.guardrail, frame.agent)
        scopes.append(_Scope(key=key, agent=frame.agent, guarding=frame.guarding))
    return scopes


class _Progress(NamedTuple):
    """How far a workflow went: its transitions, whether it completed, whether it waits for an approval."""

    transitions: int = 0
    completed: bool = False
    awaiting_approval: bool = False

    @classmethod
    def of(cls, state: RunState) -> _Progress:
        flow = state.workflow
        if flow is None:
            return cls()
        return cls(
            flow.transitions, flow.status is WorkflowStatus.COMPLETED, flow.status is WorkflowStatus.AWAITING_APPROVAL
        )


def _moves(state: RunState, before: _Progress, now: _Progress) -> list[TrailEntry]:
    """The workflow's moves from ``before`` to ``now``: its last trail entries (each transition is one; an end
    node's entry is none, and is made once, when the workflow completes)."""
    if state.workflow is None:
        return []
    count = max(0, now.transitions - before.transitions) + (1 if now.completed and not before.completed else 0)
    trail = state.workflow.trail
    return list(trail[len(trail) - min(count, len(trail)) :])


class _AgentSpans:
    """The spans open in one drive, kept as the checkpointed states ask (:meth:`observe`)."""

    def __init__(self, loop: RunLoop, *, agent_id: str | None, state: RunState) -> None:
        self._loop = loop
        self._agent_id = agent_id
        self._parent = otel_context.get_current()
        self._open: list[_Open] = []
        self._progress = _Progress.of(state)
        self._closed = False

    def acting(self) -> _Open | None:
        """The span of the agent acting now (the innermost)."""
        return next((o for o in reversed(self._open) if o.scope.node is None), None)

    def observe(self, state: RunState) -> None:
        """End the spans ``state`` no longer asks for, record the workflow's moves, start those it now asks for."""
        if self._closed:
            return
        wanted = _scopes(state, workflow=self._loop.spec.workflow is not None)
        kept = 0
        while kept < min(len(wanted), len(self._open)) and wanted[kept].key == self._open[kept].scope.key:
            kept += 1
        before, self._progress = self._progress, _Progress.of(state)
        moves = _moves(state, before, self._progress)
        for opened in reversed(self._open[kept:]):
            self._end(opened, state, moves)
        del self._open[kept:]
        for move in moves:  # nodes that ran no agent (an agent node's move ended its span above)
            self._instant(state, move.node, move.node_type, move.outcome)
        if self._progress.awaiting_approval and not before.awaiting_approval and state.workflow is not None:
            node = str(state.workflow.node)
            self._instant(state, node, self._node_type(node), "awaiting_approval")
        for scope in wanted[kept:]:
            parent = trace.set_span_in_context(self._open[-1].span) if self._open else self._parent
            self._open.append(_Open(scope, self._start(scope, state, parent)))

    def close(self, error: BaseException | None) -> None:
        """End every span still open (innermost first), as interrupted by ``error`` when given."""
        if self._closed:
            return
        self._closed = True
        for opened in reversed(self._open):
            if error is not None and opened.span.is_recording():
                opened.span.set_attribute("error.type", type(error).__name__)
                opened.span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
            self._end(opened, None, [])
        self._open.clear()

    # -- the spans --------------------------------------------------------------------------------------

    def _start(self, scope: _Scope, state: RunState, parent: otel_context.Context) -> Span:
        if scope.node is not None:
            span = tracer().start_span(f"workflow_node {scope.node}", context=parent, kind=SpanKind.INTERNAL)
            if span.is_recording():
                span.set_attributes(self._node_attributes(state, scope.node, self._node_type(scope.node)))
            return span
        member = self._loop.members.get(scope.agent) if scope.agent is not None else None
        spec = member.spec if member is not None else self._loop.spec
        agent_id = scope.agent if scope.agent is not None else self._agent_id
        name = spec.name if member is not None or scope.agent is None else scope.agent  # (an agent not resolved)
        span = tracer().start_span(f"invoke_agent {name}", context=parent, kind=SpanKind.INTERNAL)
        if span.is_recording():
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.agent.name": name,
                "switchyard.run_id": state.run_id,
            }
            if member is not None or scope.agent is None:
                attributes["gen_ai.request.model"] = spec.model
            if agent_id is not None:
                attributes["gen_ai.agent.id"] = agent_id
            if member is not None:
                attributes["switchyard.agent_version"] = member.version
            if scope.guarding is not None:
                attributes["switchyard.guardrail"] = scope.guarding  # a judge of the run's input or an answer
            span.set_attributes(attributes)
        return span

    def _end(self, opened: _Open, state: RunState | None, moves: list[TrailEntry]) -> None:
        span, scope = opened.span, opened.scope
        if span.is_recording():
            if scope.node is None:
                span.set_attributes(
                    {
                        "gen_ai.usage.input_tokens": opened.input_tokens,
                        "gen_ai.usage.output_tokens": opened.output_tokens,
                        "switchyard.chip_us": opened.chip_us,
                    }
                )
            elif state is not None:
                outcome = self._node_outcome(state, opened, moves)
                if outcome is not None:
                    span.set_attribute("switchyard.workflow.outcome", outcome)
        span.end()

    def _node_outcome(self, state: RunState, opened: _Open, moves: list[TrailEntry]) -> str | None:
        """What happened at an agent node whose agent stopped: its move in the trail (taken out of ``moves``), or
        how its step ended (a failed node moves nowhere: the workflow fails)."""
        for index, move in enumerate(moves):
            if move.node == opened.scope.node and move.node_type == "agent":
                del moves[index]
                return move.outcome
        step = next((s for s in state.steps if s.id == opened.scope.key[1]), None)
        if step is None:
            return None
        if step.is_error:
            opened.span.set_status(Status(StatusCode.ERROR, (step.output or "")[:200]))
        return str(step.status.value)

    def _instant(self, state: RunState, node: str, node_type: str, outcome: str) -> None:
        """A span of no duration for a move of the workflow that ran no agent."""
        now = time.time_ns()
        span = tracer().start_span(
            f"workflow_node {node}", context=self._parent, kind=SpanKind.INTERNAL, start_time=now
        )
        if span.is_recording():
            span.set_attributes(self._node_attributes(state, node, node_type))
            span.set_attribute("switchyard.workflow.outcome", outcome)
        span.end(end_time=now)

    def _node_attributes(self, state: RunState, node: str, node_type: str) -> dict[str, Any]:
        workflow = self._loop.spec.workflow
        attributes: dict[str, Any] = {
            "switchyard.workflow.node_id": node,
            "switchyard.workflow.node_type": node_type,
            "switchyard.workflow.name": workflow.name if workflow is not None else "",
            "switchyard.run_id": state.run_id,
        }
        if self._agent_id is not None:
            attributes["switchyard.workflow.id"] = self._agent_id
        return attributes

    def _node_type(self, node: str) -> str:
        workflow = self._loop.spec.workflow
        try:
            return workflow.node(node).type if workflow is not None else "agent"
        except KeyError:
            return "unknown"


class _ActingModel:
    """A model whose calls run inside the span of the agent acting (their ``chat`` spans are its children)."""

    def __init__(self, model: Model, spans: _AgentSpans) -> None:
        self._model = model
        self._spans = spans

    async def request(self, request: ModelRequest) -> ModelResponse:
        acting = self._spans.acting()
        if acting is None:
            return await self._model.request(request)
        with trace.use_span(acting.span, record_exception=False, set_status_on_exception=False):
            response = await self._model.request(request)
        acting.add(response)
        return response
