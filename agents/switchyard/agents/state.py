"""The checkpointed state of a run and the actions the run loop asks its driver to perform.

Everything here is plain data: ``RunState.model_dump(mode="json")`` is what the platform stores after every
transition, and ``RunState.model_validate(stored)`` restores it on any worker.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchyard.agents.messages import Message, ToolCall, Usage
from switchyard.agents.model import ModelRequest
from switchyard.agents.tools.base import RetrySemantics, ToolKind
from switchyard.agents.workflows.machine import WorkflowState

__all__ = [
    "TERMINAL_STATUSES",
    "Action",
    "AwaitClient",
    "CallModel",
    "ExecuteTools",
    "Frame",
    "RequiredAction",
    "RunError",
    "RunFinished",
    "RunState",
    "RunStatus",
    "Step",
    "StepStatus",
    "StepType",
    "ToolInvocation",
]


class RunStatus(StrEnum):
    """A run's status as the API shows it (``cancelling`` is the platform's, between request and effect)."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    REQUIRES_ACTION = "requires_action"
    CANCELLED = "cancelled"
    FAILED = "failed"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    EXPIRED = "expired"


TERMINAL_STATUSES = frozenset(
    {RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.COMPLETED, RunStatus.INCOMPLETE, RunStatus.EXPIRED}
)


class StepStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class StepType(StrEnum):
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"


class Step(BaseModel):
    """One model call or one tool call of a run, with its timings, tokens and compute.

    A step is recorded ``in_progress`` before its work starts and completed after; ``chip_us`` and
    ``usage`` are set once, at completion, so a step is billed at most once.
    """

    id: str
    index: int
    type: StepType
    status: StepStatus = StepStatus.IN_PROGRESS
    created_at_ms: int
    completed_at_ms: int | None = None
    # model calls
    model: str | None = None
    usage: Usage | None = None
    chip_us: int = 0
    cache_saved_chip_us: int = Field(default=0, description="chip-µs its cached prompt tokens did not cost (estimate)")
    receipt_id: str | None = None
    ttft_ms: float | None = Field(default=None, description="time to first token of the model call (its receipt's)")
    replica: str | None = Field(default=None, description="the pool replica that served the model call")
    finish_reason: str | None = Field(default=None, description="stop | length | tool_calls")
    dropped_messages: int = Field(default=0, description="history messages left out of the context")
    agent: str | None = Field(default=None, description="the agent acting (after a handoff), else the run's own")
    depth: int = Field(default=0, description="how many agents called as tools it was made within")
    # tool calls
    tool_call: ToolCall | None = None
    tool_kind: ToolKind | None = None
    retry: RetrySemantics | None = None
    output: str | None = None
    is_error: bool = False

    @property
    def duration_ms(self) -> int | None:
        return None if self.completed_at_ms is None else self.completed_at_ms - self.created_at_ms


class RequiredAction(BaseModel):
    """What the client must do before the run can continue."""

    type: Literal["submit_tool_outputs", "approval"]
    tool_calls: tuple[ToolCall, ...]
    expires_at_ms: int


class RunError(BaseModel):
    """``last_error`` of a failed run."""

    code: str
    message: str


class Frame(BaseModel):
    """An agent running on a context of its own: called as a tool (``step_id``: the call that waits for its
    answer), or judging as a guardrail (``guarding`` the run's ``input`` or ``output``, the ``guardrail``'s index,
    and the ``answer`` held until judged); the agent acting (it may hand off in turn) and its conversation (the
    text it is given first)."""

    step_id: str | None = None
    agent: str
    messages: list[Message] = Field(default_factory=list)
    guarding: Literal["input", "output"] | None = None
    guardrail: int = 0
    answer: Message | None = None


class RunState(BaseModel):
    """Everything needed to continue a run on any worker; JSON-serialisable.

    ``messages`` are the messages this run produced (assistant answers and tool results), in order; the
    thread's earlier messages are passed to the loop separately on every call.
    """

    run_id: str
    status: RunStatus = RunStatus.QUEUED
    revision: int = Field(default=0, description="incremented by every transition (optimistic concurrency)")
    created_at_ms: int
    started_at_ms: int | None = None
    completed_at_ms: int | None = None
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    approvals: dict[str, bool] = Field(default_factory=dict)
    active_agent: str | None = Field(default=None, description="the agent handed off to last, else the run's own")
    agents: dict[str, int] = Field(
        default_factory=dict,
        description="the versions of the agents it may hand off to or call, fixed when it started",
    )
    frames: list[Frame] = Field(default_factory=list, description="agents called as tools, innermost last")
    workflow: WorkflowState | None = Field(default=None, description="where a workflow's run stands in its graph")
    required_action: RequiredAction | None = None
    usage: Usage = Field(default_factory=Usage)
    chip_us: int = 0
    incomplete_reason: str | None = Field(
        default=None, description="max_steps | max_tokens | max_chip_seconds | timeout"
    )
    last_error: RunError | None = None

    @property
    def final_message(self) -> Message | None:
        """The final assistant answer of a completed run."""
        if self.status is RunStatus.COMPLETED and self.messages:
            return self.messages[-1]
        return None

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class CallModel(BaseModel):
    """Call the model with ``request`` and record the answer with ``RunLoop.record_model_response``."""

    kind: Literal["call_model"] = "call_model"
    step_id: str
    request: ModelRequest


class ToolInvocation(BaseModel):
    """One tool call to execute on the worker."""

    step_id: str
    tool_call: ToolCall
    arguments: dict[str, Any]
    agent: str | None = None


class ExecuteTools(BaseModel):
    """Execute these worker-side tool calls (in any order or concurrently), recording each result."""

    kind: Literal["execute_tools"] = "execute_tools"
    invocations: tuple[ToolInvocation, ...]


class AwaitClient(BaseModel):
    """The run waits in ``requires_action`` for tool outputs or approvals from the client."""

    kind: Literal["await_client"] = "await_client"
    required_action: RequiredAction


class RunFinished(BaseModel):
    """The run reached a terminal status; nothing more to do."""

    kind: Literal["finished"] = "finished"
    status: RunStatus


Action = CallModel | ExecuteTools | AwaitClient | RunFinished
