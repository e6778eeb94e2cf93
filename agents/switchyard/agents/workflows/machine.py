"""The workflow interpreter: a pure, synchronous, deterministic state machine (no I/O; the worker drives it).

Driving it::

    state = machine.start(spec, input_text)                         # persist state
    while True:
        state, action = machine.advance(spec, state)                # persist state
        match action:
            case RunAgent():         answer = run the agent (action.agent_id, action.version) on action.input
                                     state = machine.record_output(spec, state, action.node, answer)
            case CallTool():         output = call the tool (action.tool, on action.server_label) with action.arguments
                                     state = machine.record_output(spec, state, action.node, output)
            case AwaitApproval():    stop; when a person decides: state = machine.record_approval(spec, state, ...)
            case WorkflowFinished(): stop

``advance`` runs the pure nodes (``if_else``, ``while``, ``set_state``, ``transform``, ``guardrail``) itself and
stops at the first node that needs the outside world. It is idempotent at such a node: a worker that died while an
agent ran loads the last stored state, calls ``advance`` again and gets the same :class:`RunAgent` (or
:class:`CallTool`). The expressions of one ``advance`` call share one :class:`WorkBudget`, so a call holds a
shared worker's core for a bounded time.

A run's errors are not raised: they end the workflow ``failed`` with a :class:`WorkflowError`
(``expression_error``, ``output_type_error``, ``max_transitions``, or the code given to :func:`fail`). Calls that
do not fit the state (recording an answer for a node the workflow is not at) raise :class:`InvalidTransitionError`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchyard.agents.errors import InvalidTransitionError
from switchyard.agents.guardrails import first_trip
from switchyard.agents.workflows.expressions import (
    ExpressionError,
    Scope,
    WorkBudget,
    parse,
    parse_json,
    to_text,
    truthy,
)
from switchyard.agents.workflows.spec import (
    AgentNode,
    EndNode,
    FileSearchNode,
    FunctionNode,
    GuardrailNode,
    IfElseNode,
    McpNode,
    SetStateNode,
    TransformNode,
    UserApprovalNode,
    WhileNode,
    WorkflowNode,
    WorkflowSpec,
)
from switchyard.agents.workflows.templates import render

__all__ = [
    "MAX_TRAIL_ENTRIES",
    "MAX_TRANSITIONS",
    "AwaitApproval",
    "CallTool",
    "RunAgent",
    "TrailEntry",
    "WorkflowAction",
    "WorkflowError",
    "WorkflowFinished",
    "WorkflowState",
    "WorkflowStatus",
    "advance",
    "fail",
    "record_approval",
    "record_output",
    "start",
]

MAX_TRANSITIONS = 10_000  # moves from node to node in a workflow's whole life
MAX_TRAIL_ENTRIES = 1_000  # the newest are kept
_NOT_JSON = object()


class WorkflowStatus(StrEnum):
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"


class WorkflowError(BaseModel):
    """Why a workflow failed: ``code`` is ``expression_error``, ``output_type_error``, ``max_transitions`` or
    the code the platform gave :func:`fail`."""

    code: str
    message: str


class TrailEntry(BaseModel):
    """A node the workflow passed and what happened there (``then``, ``iteration 2``, ``approved`` ...)."""

    node: str
    node_type: str
    outcome: str


class WorkflowState(BaseModel):
    """Everything needed to continue a workflow on any worker; ``model_dump(mode="json")`` is what is stored."""

    status: WorkflowStatus = WorkflowStatus.RUNNING
    node: str | None = Field(description="the node the workflow is at (where it ended, once finished)")
    vars: dict[str, Any] = Field(default_factory=dict, description="the state variables")
    input: str
    last_output: str | None = Field(default=None, description="the last agent's answer or tool's output")
    iterations: dict[str, int] = Field(
        default_factory=dict,
        description="per while node, its iterations since it was entered; reset when it exits through next "
        "(a loop left by another edge, from inside its body, keeps its count, which only makes it stricter)",
    )
    transitions: int = Field(default=0, description="moves from node to node so far")
    output: str | None = Field(default=None, description="the final answer of a completed workflow")
    error: WorkflowError | None = None
    trail: list[TrailEntry] = Field(default_factory=list, description=f"the newest {MAX_TRAIL_ENTRIES:,} moves")

    @property
    def finished(self) -> bool:
        return self.status in (WorkflowStatus.COMPLETED, WorkflowStatus.FAILED)

    def scope(self, budget: WorkBudget | None = None) -> Scope:
        """What the workflow's expressions see (spending ``budget``, by default a fresh one)."""
        return Scope(state=self.vars, input=self.input, last_output=self.last_output, budget=budget or WorkBudget())


class RunAgent(BaseModel):
    """Run the agent on ``input`` and record its answer with :func:`record_output`."""

    kind: Literal["run_agent"] = "run_agent"
    node: str
    agent_id: str
    version: int | None
    input: str


class CallTool(BaseModel):
    """Call the workflow's tool ``tool`` (on its MCP server ``server_label``, when given) with ``arguments`` and
    record its output with :func:`record_output`."""

    kind: Literal["call_tool"] = "call_tool"
    node: str
    tool: str
    server_label: str | None = None
    arguments: dict[str, Any]


class AwaitApproval(BaseModel):
    """The workflow waits for a person to approve or reject ``message`` (:func:`record_approval`)."""

    kind: Literal["await_approval"] = "await_approval"
    node: str
    message: str


class WorkflowFinished(BaseModel):
    """The workflow completed (with ``output``) or failed; nothing more to do."""

    kind: Literal["finished"] = "finished"
    status: WorkflowStatus
    output: str | None


WorkflowAction = RunAgent | CallTool | AwaitApproval | WorkflowFinished


class _Halt(Exception):
    """Ends the workflow ``failed`` (raised inside a transition, turned into state by the public function)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def start(spec: WorkflowSpec, input_text: str) -> WorkflowState:
    """A running workflow at ``spec.start``, its variables at their defaults."""
    return WorkflowState(
        node=spec.start, input=input_text, vars={name: var.default for name, var in spec.state.items()}
    )


def advance(spec: WorkflowSpec, state: WorkflowState) -> tuple[WorkflowState, WorkflowAction]:
    """Run pure nodes until the workflow needs an agent, a tool, an approval, or is finished; say which."""
    if state.finished:
        return state.model_copy(deep=True), _finished(state)
    work = state.model_copy(deep=True)
    # one scope for the whole call: its budget bounds all the call's nodes and loop iterations together, and it sees
    # work.vars as set_state and transform change them (input and last_output do not change until an agent answers)
    scope = work.scope(WorkBudget())
    try:
        while True:
            assert work.node is not None
            node = spec.node(work.node)
            action = _visit(spec, work, node, scope)
            if action is not None:
                return work, action
    except _Halt as halt:
        failed = fail(work, halt.code, halt.message)
        return failed, _finished(failed)


def record_output(spec: WorkflowSpec, state: WorkflowState, node_id: str, output: str) -> WorkflowState:
    """Record the answer of the agent (or the output of the tool) of node ``node_id`` (the node the workflow is at)
    and move past it."""
    node = _current(spec, state, node_id, WorkflowStatus.RUNNING)
    if not isinstance(node, AgentNode | FunctionNode | McpNode | FileSearchNode):
        raise InvalidTransitionError(f"node {node_id!r} is a {node.type} node, which has no output to record")
    work = state.model_copy(deep=True)
    work.last_output = output
    try:
        if node.output_to is not None:
            var = spec.state[node.output_to]
            value = output if var.type == "string" else parse_json(output, default=_NOT_JSON)
            if value is _NOT_JSON:
                not_json = f"the {_what(node)} is not JSON (output_to {node.output_to!r})"
                raise _Halt("output_type_error", f"node {node.id!r}: {not_json}")
            work.vars[node.output_to] = _coerce(spec, node, node.output_to, value, "output_type_error")
        _move(work, node, f"{'agent' if isinstance(node, AgentNode) else 'tool'} answered", node.next)
    except _Halt as halt:
        return fail(work, halt.code, halt.message)
    return work


def record_approval(spec: WorkflowSpec, state: WorkflowState, node_id: str, approved: bool) -> WorkflowState:
    """Record a person's decision at the ``user_approval`` node ``node_id`` and move past it."""
    node = _current(spec, state, node_id, WorkflowStatus.AWAITING_APPROVAL)
    assert isinstance(node, UserApprovalNode)
    work = state.model_copy(deep=True)
    work.status = WorkflowStatus.RUNNING
    try:
        _move(work, node, "approved" if approved else "rejected", node.approved if approved else node.rejected)
    except _Halt as halt:
        return fail(work, halt.code, halt.message)
    return work


def fail(state: WorkflowState, code: str, message: str) -> WorkflowState:
    """The workflow ended ``failed`` with ``code`` and ``message`` (e.g. when an agent's run failed)."""
    if state.finished:
        raise InvalidTransitionError(f"the workflow is already {state.status}")
    work = state.model_copy(deep=True)
    work.status = WorkflowStatus.FAILED
    work.error = WorkflowError(code=code, message=message)
    return work


def _finished(state: WorkflowState) -> WorkflowFinished:
    return WorkflowFinished(status=state.status, output=state.output)


def _current(spec: WorkflowSpec, state: WorkflowState, node_id: str, status: WorkflowStatus) -> WorkflowNode:
    if state.status is not status or state.node != node_id:
        raise InvalidTransitionError(
            f"the workflow is {state.status} at node {state.node!r}, not {status} at node {node_id!r}"
        )
    return spec.node(node_id)


def _visit(spec: WorkflowSpec, work: WorkflowState, node: WorkflowNode, scope: Scope) -> WorkflowAction | None:
    """Carry out ``node`` on ``work`` (in place): the action it needs, or ``None`` once it moved on."""
    try:
        match node:
            case AgentNode():
                default = work.last_output if work.last_output is not None else work.input
                text = default if node.input is None else to_text(render(node.input, scope))
                return RunAgent(node=node.id, agent_id=node.agent_id, version=node.version, input=text)
            case FunctionNode() | McpNode():
                arguments = render(node.arguments, scope)
                if not isinstance(arguments, dict):
                    raise ExpressionError(f"arguments rendered {type(arguments).__name__}, not an object")
                label = node.server_label if isinstance(node, McpNode) else None
                return CallTool(node=node.id, tool=node.tool, server_label=label, arguments=arguments)
            case FileSearchNode():
                query = to_text(render(node.query, scope))
                return CallTool(node=node.id, tool="file_search", arguments={"query": query})
            case GuardrailNode():
                default = work.last_output if work.last_output is not None else work.input
                text = default if node.input is None else to_text(render(node.input, scope))
                trip = first_trip(node.guardrails, text)
                if trip is not None and node.reason_to is not None:
                    work.vars[node.reason_to] = trip.message("workflow")
                outcome = "passed" if trip is None else _shortened(f"tripped {trip.guardrail}")
                _move(work, node, outcome, node.passed if trip is None else node.tripped)
            case UserApprovalNode():
                work.status = WorkflowStatus.AWAITING_APPROVAL
                return AwaitApproval(node=node.id, message=to_text(render(node.message, scope)))
            case EndNode():
                output = work.last_output if node.output is None else to_text(render(node.output, scope))
                work.status, work.output = WorkflowStatus.COMPLETED, output
                _trail(work, node, "completed")
                return _finished(work)
            case IfElseNode():
                decided = truthy(parse(node.condition).evaluate(scope))
                _move(work, node, "then" if decided else "else", node.then if decided else node.else_)
            case WhileNode():
                _loop(work, node, scope)
            case SetStateNode():
                values = {var: parse(text).evaluate(scope) for var, text in node.assignments.items()}
                for var, value in values.items():
                    work.vars[var] = _coerce(spec, node, var, value, "expression_error")
                _move(work, node, _shortened(f"set {', '.join(values)}"), node.next)
            case TransformNode():
                value = render(node.template, scope)
                work.vars[node.output_to] = _coerce(spec, node, node.output_to, value, "expression_error")
                _move(work, node, "transformed", node.next)
    except ExpressionError as exc:
        raise _Halt("expression_error", f"node {node.id!r}: {exc}") from None
    return None


def _loop(work: WorkflowState, node: WhileNode, scope: Scope) -> None:
    done = work.iterations.get(node.id, 0)
    if done >= node.max_iterations:
        outcome = "max_iterations"
    elif truthy(parse(node.condition).evaluate(scope)):
        work.iterations[node.id] = done + 1
        _move(work, node, f"iteration {done + 1}", node.body)
        return
    else:
        outcome = "done"
    work.iterations.pop(node.id, None)
    _move(work, node, outcome, node.next)


def _coerce(spec: WorkflowSpec, node: WorkflowNode, var: str, value: Any, code: str) -> Any:
    try:
        return spec.state[var].coerce(value)
    except ValueError as exc:
        raise _Halt(code, f"node {node.id!r}: state variable {var!r}: {exc}") from None


def _move(work: WorkflowState, node: WorkflowNode, outcome: str, target: str) -> None:
    if work.transitions >= MAX_TRANSITIONS:
        raise _Halt("max_transitions", f"node {node.id!r}: the workflow made {MAX_TRANSITIONS:,} transitions")
    work.transitions += 1
    work.node = target
    _trail(work, node, outcome)


def _what(node: AgentNode | FunctionNode | McpNode | FileSearchNode) -> str:
    return "answer" if isinstance(node, AgentNode) else "output"


def _shortened(outcome: str) -> str:
    # a trail entry stays small: the trail is stored with every transition
    return outcome if len(outcome) <= 100 else outcome[:99] + "…"


def _trail(work: WorkflowState, node: WorkflowNode, outcome: str) -> None:
    work.trail.append(TrailEntry(node=node.id, node_type=node.type, outcome=outcome))
    if len(work.trail) > MAX_TRAIL_ENTRIES:
        del work.trail[:-MAX_TRAIL_ENTRIES]
